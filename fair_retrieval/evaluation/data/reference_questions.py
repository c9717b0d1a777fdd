"""Questions in a reader's own words about the prose of Python's reference documentation, for the demo.

The needle benchmark's questions repeat their fact's invented names, so BM25 alone finds every one: they show where
an answer sits, not why a store should search by meaning and by words. These questions ask what a Python user asks
about the same prose (`pydoc_data.topics`, shipped with CPython under the PSF licence), mostly in other words than
the text's, some naming the identifier they are about. Each carries a passage copied from the text that answers it;
its relevant document is the one document holding that passage. Written once, before any run, and not chosen by
how any retriever scores them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.data.tokens import TokenCounter

logger = logging.getLogger(__name__)

QUESTION_PREFIX = "ref-q"
"""The id prefix of these questions (the needle questions' is "needle-q"): how reports tell the two kinds apart."""

REFERENCE_QUESTIONS: tuple[tuple[str, str], ...] = (
    (
        "Do my sanity checks still run when Python is started with optimisations on?",
        "The current code generator emits no code for an assert statement when optimization is requested",
    ),
    (
        "Where do the type hints I write on module-level variables end up?",
        "a dictionary mapping from variable names (mangled if private) to evaluated annotations",
    ),
    (
        "Can one object change what a method does for itself alone, unlike its siblings?",
        "Accordingly, instances can redefine and override methods.",
    ),
    (
        "Why can't I replace a property's behaviour on a single object?",
        "Accordingly, instances cannot override the behavior of a property.",
    ),
    (
        "Which built-in types support the @ operator for matrices?",
        "No builtin Python types implement this operator.",
    ),
    (
        "Why does 7 / 2 give 3.5 while 7 // 2 gives 3?",
        "Division of integers yields a float, while floor division of integers results in an integer",
    ),
    (
        "How do I give an empty string a fallback value in one short expression?",
        "the expression \"s or 'foo'\" yields the desired value",
    ),
    (
        "After I leave a loop early, what value does the loop variable keep?",
        "the loop control target keeps its current value",
    ),
    (
        "Why does a list I use as a default argument keep growing between calls?",
        "Default values are calculated, once, when the function is defined",
    ),
    (
        "What do I add to my class so that its objects can be called like functions?",
        'The class must define a "__call__()" method',
    ),
    (
        "Can I write 1 < x < 10 and have it mean what it means in maths?",
        "Comparisons can be chained arbitrarily",
    ),
    (
        "What happens when I sort objects of my own class that define no ordering?",
        'A default order comparison ("<", ">", "<=", and ">=") is not provided; an attempt raises "TypeError".',
    ),
    (
        "Can a short block go on the same line as its if?",
        "A suite can be one or more semicolon-separated simple statements on the same line as the header",
    ),
    (
        "Why is the error I caught gone once the handler block ends?",
        'When an exception has been assigned using "as target", it is cleared at the end of the "except" clause.',
    ),
    (
        "How do I get hold of the error being handled from inside the handler?",
        'the exception is stored in the "sys" module, where it can be accessed from within the body',
    ),
    (
        "If my cleanup block returns, what becomes of the error that was on its way out?",
        'If the "finally" clause executes a "return", "break" or "continue" statement, the saved exception is '
        "discarded",
    ),
    (
        "What does Python hand to __exit__ when the block raised?",
        'its type, value, and traceback are passed as arguments to "__exit__()"',
    ),
    (
        "How many catch-all cases can one match statement have, and where do they go?",
        "A match statement may have at most one irrefutable case block, and it must be last.",
    ),
    (
        "How does a case pattern compare a value with None, True or False?",
        'For the singletons "None", "True" and "False", the "is" operator is used.',
    ),
    (
        "Does a plain string match a pattern written like a list?",
        'If the subject value is an instance of "str", "bytes" or "bytearray" the sequence pattern fails.',
    ),
    (
        "How do I stop in the debugger from my code without importing anything?",
        'The built-in "breakpoint()", when called with defaults, can be used instead of',
    ),
    (
        "How do I give the debugger several commands on one line?",
        'Multiple commands may be entered on a single line, separated by ";;".',
    ),
    (
        "Where can I keep debugger shortcuts so that every session loads them?",
        'If a file ".pdbrc" exists in the user’s home directory or in the current directory',
    ),
    (
        "What do I get when a dict literal names the same key twice?",
        "the final dictionary’s value for that key will be the last one given",
    ),
    (
        "Can I split long numbers into groups of digits to read them better?",
        "As in integer literals, underscores are supported for digit grouping.",
    ),
    (
        "How do I put a literal curly brace into a format string?",
        "it can be escaped by doubling",
    ),
    (
        "How can I show large numbers with a separator between the thousands?",
        "The \"','\" option signals the use of a comma for a thousands separator.",
    ),
    (
        "Are two empty lists made one after the other the same object?",
        "are guaranteed to refer to two different, unique, newly created empty lists",
    ),
    (
        "Why should I close files myself rather than wait for Python to clean up?",
        "since garbage collection is not guaranteed to happen",
    ),
    (
        "Why does -1 % 10 differ from math.fmod(-1, 10)?",
        "returns a result whose sign matches the sign of the first argument instead",
    ),
    (
        "Which statement does nothing at all, for a block that must not be empty?",
        '"pass" is a null operation',
    ),
    (
        "What comes out when a negative number is raised to a fractional power?",
        'Raising a negative number to a fractional power results in a "complex" number.',
    ),
    (
        "How do I hide the earlier error when I raise a new one inside a handler?",
        'Exception chaining can be explicitly suppressed by specifying "None" in the "from" clause',
    ),
    (
        "How do I make my class explicitly not iterable?",
        'if a class sets "__iter__()" to "None", the class is not iterable',
    ),
    (
        "Can a generator written with async def return a value?",
        'A non-empty "return" statement is a syntax error in an asynchronous generator function.',
    ),
    (
        "What happens when I just press Enter at the debugger's prompt?",
        "Entering a blank line repeats the last command entered.",
    ),
    (
        "Can nonlocal create a new variable in the enclosing function?",
        "must refer to pre-existing bindings in an enclosing scope",
    ),
)
"""(question, a passage of the reference documentation that answers it), in the order they were written."""


def with_reference_questions(
    task: RetrievalTask,
    count_tokens: TokenCounter | None,
    questions: Sequence[tuple[str, str]] = REFERENCE_QUESTIONS,
) -> RetrievalTask:
    """`task` with `questions` added, each judged on the one document of its corpus that holds its passage.

    A question whose passage is in no document, or in more than one (the reference repeats some sentences, and
    another Python's documentation words some differently), is left out, and the count kept in `info`.

    Args:
        task: a task over prose of `pydoc_data.topics`, such as the needle benchmark; its questions are kept.
        count_tokens: the model's token counter, to measure where each answer sits (None: characters only).
        questions: (question, answering passage) pairs.

    Returns:
        A task of the same corpus, its questions first, then these as "ref-q000", "ref-q001", ... (numbered by
        their place in `questions`, so a left-out one leaves a gap).
    """
    answers: dict[str, tuple[str, int, int]] = {}
    for qid in task.query_ids:
        position, (doc_id,) = task.positions[qid], task.qrels[qid]
        answers[qid] = (doc_id, position.char_start, position.char_end)
    queries = dict(task.queries)
    left_out = 0
    for number, (question, passage) in enumerate(questions):
        holders = [(doc_id, text.find(passage)) for doc_id, text in task.corpus.items() if passage in text]
        if len(holders) != 1:
            left_out += 1
            logger.debug("left out %r: its passage is in %d documents", question, len(holders))
            continue
        (doc_id, start), qid = holders[0], f"{QUESTION_PREFIX}{number:03d}"
        queries[qid] = question
        answers[qid] = (doc_id, start, start + len(passage))
    info = {**task.info, "reference_questions": len(queries) - len(task.queries), "reference_left_out": left_out}
    return RetrievalTask.from_answer_spans(task.name, task.corpus, queries, answers, count_tokens, info)
