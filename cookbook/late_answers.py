"""A small, constructed retrieval case: answers that sit at the end of long documents.

The documents are issues of an imaginary town newsletter. Each is ~440 MiniLM tokens of ordinary news items; ten of
them also carry one *answer* sentence, and each of the ten questions is answered by exactly one newsletter. Other
newsletters carry *near misses*: sentences on the same subject as a question that do not answer it (a real corpus
has those too). Everything is generated from a seed, so the corpus is the same on every machine.

`build_case(answer_position="end")` puts every answer sentence last; `"start"` puts it first, as a control.
Near misses go to a random position, drawn from the same seed for both settings.

Used by the cookbook notebooks and by the integration tests of llama-index-embeddings-fair,
llama-index-vector-stores-fair and langchain-fair.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

NEWS_ITEMS = [
    "The parish council approved a modest increase in the budget for repairing the footpaths along the canal.",
    "Residents of Mill Lane have asked for a second recycling collection during the busy summer months.",
    "The community choir is looking for tenors and basses for its winter concert in the old corn exchange.",
    "A new timetable for the number seven bus comes into force at the start of next month.",
    "The allotment society reminds members that hosepipes may only be used before eight in the morning.",
    "Roadworks on the high street will close the junction with Station Road for three weekends.",
    "The library has extended its opening hours on Wednesdays and now lends board games as well as books.",
    "Local farmers report that the wet spring has delayed the planting of potatoes by several weeks.",
    "The primary school summer fair raised enough money to replace the climbing frame in the playground.",
    "A walking group sets off from the market cross every Sunday at ten and welcomes newcomers of all ages.",
    "The swimming pool will close for a fortnight in September while the changing rooms are refurbished.",
    "Volunteers planted two hundred native trees along the bypass as part of the county hedgerow scheme.",
    "The health centre asks patients to book flu vaccinations online or by telephone rather than in person.",
    "Parking charges in the riverside car park will rise slightly to pay for new lighting and cameras.",
    "The amateur dramatic society will stage a comedy in the village hall over the Easter holidays.",
    "Several readers wrote in to praise the new benches installed in the memorial gardens.",
    "The council is consulting residents on a proposal to turn the old bus depot into affordable homes.",
    "Broadband engineers expect to finish laying fibre cables in the northern estates before the autumn.",
    "The farmers' market moves indoors to the sports hall for the winter and opens an hour later.",
    "A lost property box for gloves, scarves and umbrellas now sits behind the counter of the post office.",
    "The cricket club is appealing for help to repaint the pavilion before the first home match.",
    "Street lights on the western estate are being replaced with energy-saving lamps this month.",
    "The youth club has started a cooking course where teenagers learn to prepare cheap, healthy meals.",
    "A charity shop selling furniture and electrical goods has opened in the former bank building.",
    "The town's twinning association is planning an exchange visit with its partner town next spring.",
    "Dog owners are reminded to keep their pets on a lead in the nature reserve during nesting season.",
    "A retired teacher is offering free reading lessons for adults at the community centre on Mondays.",
    "The museum has received a grant to digitise its collection of old photographs and postcards.",
    "Heavy rain last week flooded the underpass, and the council has promised to clear the drains.",
    "The tennis courts in the park have been resurfaced and can be booked through the leisure centre.",
    "Members of the historical society will give a talk on the town's mills and their water wheels.",
    "A pop-up repair café will fix toasters, lamps and bicycles for free in the church hall.",
    "The fire brigade held an open day where children could sit in the engine and try the hose.",
    "Traders on Market Street have formed an association to organise a late-night shopping evening.",
    "The gardening club's annual show includes classes for the longest runner bean and the heaviest marrow.",
    "Work has begun on a new cycle path linking the railway station with the industrial estate.",
    "The care home is looking for volunteers to read newspapers aloud to residents on weekday mornings.",
    "An art exhibition by pupils from the secondary school is on display in the town hall foyer.",
    "The bowls club welcomed twelve new members after its taster sessions in the spring.",
    "A survey of local businesses found that most want more short-stay parking near the shops.",
]


@dataclass(frozen=True)
class Question:
    """A question, the sentence that answers it, and a sentence on the same subject that does not."""

    query: str
    answer: str
    near_miss: str


QUESTIONS = [
    Question(
        "What is the name of the lighthouse keeper's cat?",
        "The lighthouse keeper's cat, a grey tabby called Biscuit, sleeps every night on the stairs below the lamp.",
        "The lighthouse on the headland was repainted red and white after the winter storms.",
    ),
    Question(
        "How old is the sourdough starter at the town's oldest bakery?",
        "The oldest bakery in town still uses a sourdough starter that the founder's grandmother first fed in 1891.",
        "The bakery on Bridge Street has started selling gluten-free loaves on Saturdays.",
    ),
    Question(
        "How wide is the mirror of the observatory's telescope?",
        "The main telescope at the observatory has a mirror 2.4 metres wide, ground by hand over three winters.",
        "The observatory will hold a stargazing evening for families if the sky is clear.",
    ),
    Question(
        "Where do the beekeepers move their hives in spring?",
        "Every spring the beekeepers' cooperative moves its four hundred hives to the lavender fields in the south.",
        "The beekeepers' cooperative sells its honey at the farmers' market twice a month.",
    ),
    Question(
        "When does the ferry to the island stop running?",
        "The ferry to the island stops running whenever the wind is stronger than sixty kilometres per hour.",
        "The ferry company has repainted its ticket office on the quay.",
    ),
    Question(
        "Where does the chess club meet?",
        "The chess club meets on Thursday evenings in the back room of the railway museum.",
        "The chess club is celebrating its fiftieth anniversary with a commemorative mug.",
    ),
    Question(
        "Where was the violin in the museum made?",
        "The violin in the museum's glass case was made in Cremona in 1702 and keeps its original varnish.",
        "The museum's music room has been closed while the damp walls are treated.",
    ),
    Question(
        "How many puffins were nesting on the cliffs?",
        "Volunteers counted three hundred and twelve nesting puffins on the cliffs during the July survey.",
        "The cliff path will be closed near the bird colony while fencing is repaired.",
    ),
    Question(
        "Why was the marathon route changed?",
        "The marathon route was changed this year to avoid the flooded riverside path near the weir.",
        "Runners can collect their marathon numbers from the sports shop from Friday.",
    ),
    Question(
        "What machine did the school's robotics team build?",
        "The school's robotics team won the regional final with a machine that sorts recycling by colour.",
        "The robotics team is raising money to travel to a competition abroad.",
    ),
]


@dataclass(frozen=True)
class Case:
    """The corpus, the questions, and which newsletter answers each question (`answer_of[i]` for `queries[i]`)."""

    documents: list[str]
    queries: list[str]
    answer_of: list[int]


def build_case(
    answer_position: Literal["start", "end"] = "end",
    num_distractors: int = 20,
    items_per_document: int = 22,
    seed: int = 0,
) -> Case:
    """Build the newsletter corpus.

    Args:
        answer_position: "end" puts each answer sentence last in its newsletter, "start" first.
        num_distractors: newsletters without any answer (they hold the near misses, one each, cycling).
        items_per_document: ordinary news items per newsletter (22 gives ~400-450 MiniLM tokens with the answer).
        seed: the random seed for the choice and order of news items and the place of near misses.
    """
    if answer_position not in ("start", "end"):
        raise ValueError(f"answer_position must be 'start' or 'end', got {answer_position!r}.")
    rng = random.Random(seed)
    documents: list[str] = []
    answer_of: list[int] = []
    for question in QUESTIONS:
        items = rng.sample(NEWS_ITEMS, items_per_document)
        sentences = [*items, question.answer] if answer_position == "end" else [question.answer, *items]
        answer_of.append(len(documents))
        documents.append(" ".join(sentences))
    for index in range(num_distractors):
        items = rng.sample(NEWS_ITEMS, items_per_document)
        near_miss = QUESTIONS[index % len(QUESTIONS)].near_miss
        items.insert(rng.randrange(len(items) + 1), near_miss)
        documents.append(" ".join(items))
    order = list(range(len(documents)))
    rng.shuffle(order)  # answers are not simply the first ten documents
    position = {old: new for new, old in enumerate(order)}
    return Case(
        documents=[documents[old] for old in order],
        queries=[question.query for question in QUESTIONS],
        answer_of=[position[old] for old in answer_of],
    )


def ranks(scores: list[list[float]], answer_of: list[int]) -> list[int]:
    """1-based rank of the answering document for each query, given a (queries × documents) score matrix."""
    result = []
    for row, target in zip(scores, answer_of, strict=True):
        result.append(1 + sum(1 for score in row if score > row[target]))
    return result
