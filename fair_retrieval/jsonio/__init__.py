"""Small, dependency-free file I/O shared by every on-disk format of fair-retrieval, one job per module:

* `atomic`: one file, written under a temporary name in the same folder, fsynced, and renamed over the old one
  (`write_atomically`, `write_json_atomically`), so a reader, or a crash, never sees a half-written file.
* `versioned`: read a JSON object that names its `format` and `version` (`read_versioned_json`), refusing with a
  message that says what to do a file that is missing, damaged, of another format, too new, or lacking keys.
* `publication`: several files that must change together, published atomically as a whole under a folder lock
  (`Publication`); its docstring describes the protocol.
* `snapshot`: read such a set of files as one consistent generation (`Snapshot`, `retry_while_changing`).
* `locks`: the folder locks that serialise saves and tell staging folders in use from abandoned ones.
* `generation`: optimistic concurrency: a save over a newer generation than the one read is refused
  (`StoreConflictError`).
* `companion`: a store file published with the index folder beside it (`read_companion`).
* `recorded_settings`: settings a file records under a key only when they differ from the defaults
  (`settings_record`, `recorded_settings`).

Every format here is plain JSON (never pickle), so loading a file cannot execute code. The engine may import this
package, so it imports nothing else of fair_retrieval.
"""

from fair_retrieval.jsonio.atomic import (
    TEMPORARY_SUFFIX,
    file_entry,
    json_bytes,
    sync_folder,
    temporary_path,
    write_atomically,
    write_json_atomically,
    write_temporary,
)
from fair_retrieval.jsonio.companion import companion_name, index_record, read_companion
from fair_retrieval.jsonio.generation import StoreConflictError, fingerprint, record_generation, require_generation
from fair_retrieval.jsonio.locks import IN_USE_FILE, held_folder, lock_folder, remove_abandoned
from fair_retrieval.jsonio.publication import Publication
from fair_retrieval.jsonio.snapshot import (
    PUBLICATION_KEY,
    READ_ATTEMPTS,
    ChangedWhileReadingError,
    Snapshot,
    retry_while_changing,
)
from fair_retrieval.jsonio.versioned import DamagedFileError, parse_versioned_json, read_versioned_json

__all__ = [
    "IN_USE_FILE",
    "PUBLICATION_KEY",
    "READ_ATTEMPTS",
    "TEMPORARY_SUFFIX",
    "ChangedWhileReadingError",
    "DamagedFileError",
    "Publication",
    "Snapshot",
    "StoreConflictError",
    "companion_name",
    "file_entry",
    "fingerprint",
    "held_folder",
    "index_record",
    "json_bytes",
    "lock_folder",
    "parse_versioned_json",
    "read_companion",
    "read_versioned_json",
    "record_generation",
    "remove_abandoned",
    "require_generation",
    "retry_while_changing",
    "sync_folder",
    "temporary_path",
    "write_atomically",
    "write_json_atomically",
    "write_temporary",
]
