"""The store's old imports: `llama_index.embeddings.fair.FairFaissVectorStore` and `.vector_store` moved to
llama-index-vector-stores-fair. With it installed they give the same objects and a DeprecationWarning naming the new
import; without it, an ImportError that says what to install (simulated by a finder that hides the package)."""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

import pytest

NEW_PACKAGE = "llama_index.vector_stores.fair"
OLD_MODULE = "llama_index.embeddings.fair.vector_store"
NEW_IMPORT = "from llama_index.vector_stores.fair import FairFaissVectorStore"


def test_the_old_import_gives_the_new_store_with_a_deprecation_warning() -> None:
    import llama_index.embeddings.fair as old
    import llama_index.vector_stores.fair as new

    with pytest.warns(DeprecationWarning, match=NEW_IMPORT) as caught:
        store_class = old.FairFaissVectorStore
    assert store_class is new.FairFaissVectorStore
    assert all(warning.filename == __file__ for warning in caught)  # attributed to the importing line
    assert "FairFaissVectorStore" not in old.__all__  # a star import neither warns nor needs the store


def test_the_old_module_gives_the_new_names_with_a_deprecation_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_index.vector_stores.fair.faiss_vector_store as new

    monkeypatch.delitem(sys.modules, OLD_MODULE, raising=False)  # import it afresh, so that it warns
    with pytest.warns(DeprecationWarning, match=NEW_IMPORT) as caught:
        import llama_index.embeddings.fair.vector_store  # noqa: F401 - the import statement is what is tested
    assert [warning.filename for warning in caught] == [__file__]  # attributed to the import statement
    old = sys.modules[OLD_MODULE]
    for name in ("FairFaissVectorStore", "BEST_WINDOW_KEY", "DEFAULT_PERSIST_PATH", "SUPPORTED_OPERATORS"):
        assert getattr(old, name) is getattr(new, name), name
    assert old.BEST_WINDOW_KEY == "best_window"


def test_the_embeddings_import_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from llama_index.embeddings.fair import DamagedFileError, FairEmbedding, StoreConflictError

    from fair_retrieval.stores import DamagedFileError as StoreDamaged
    from fair_retrieval.stores import StoreConflictError as StoreConflict

    assert FairEmbedding.class_name() == "FairEmbedding"
    assert DamagedFileError is StoreDamaged and StoreConflictError is StoreConflict


class _HideStorePackage:
    """A meta path finder that makes `llama_index.vector_stores.fair` look uninstalled."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == NEW_PACKAGE or name.startswith(f"{NEW_PACKAGE}."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.fixture()
def without_store_package(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name in (OLD_MODULE, NEW_PACKAGE) or name.startswith(f"{NEW_PACKAGE}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_HideStorePackage(), *sys.meta_path])


@pytest.mark.usefixtures("without_store_package")
def test_without_the_store_distribution_the_old_imports_say_what_to_install() -> None:
    import llama_index.embeddings.fair as old

    expected = r"pip install llama-index-vector-stores-fair .*from llama_index\.vector_stores\.fair import"
    with pytest.raises(ImportError, match=expected):
        old.FairFaissVectorStore  # noqa: B018 - the attribute access is what is tested
    with pytest.raises(ImportError, match=expected):
        importlib.import_module(OLD_MODULE)
    assert old.FairEmbedding.class_name() == "FairEmbedding"  # the embeddings need no store


def test_other_missing_modules_are_not_blamed_on_the_store_distribution() -> None:
    from llama_index.embeddings.fair.moved import raise_if_store_missing

    raise_if_store_missing(ModuleNotFoundError("No module named 'faiss'", name="faiss"))  # returns: not ours
    raise_if_store_missing(ModuleNotFoundError("no name"))
    with pytest.raises(ImportError, match="llama-index-vector-stores-fair"):
        raise_if_store_missing(
            ModuleNotFoundError("No module named 'llama_index.vector_stores'", name="llama_index.vector_stores")
        )
