"""The official C++-core RocketMQ Python client: ``rocketmq-client-python`` 0.5.0rc2, whose manylinux wheel
bundles ``librocketmq.so`` (rocketmq-client-cpp), a remoting (4.x wire) client that needs nothing else.

Its package is called ``rocketmq``, as the 5.x gRPC client's is, so the two cannot be installed side by
side in one site-packages (the second would overwrite the first's ``__init__``). ``scripts/bootstrap.sh``
installs it apart, ``pip install --no-deps --target <venv>/txmq-cpp-client``, and ``load`` imports it from
there under the name ``rocketmq_cpp`` (its own imports are relative, so the rename is transparent to it).
``TXMQ_CPP_CLIENT`` names another such directory.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from txmq.errors import ToolMissingError

PIN = "rocketmq-client-python==0.5.0rc2"
ALIAS = "rocketmq_cpp"
_DIR_NAME = "txmq-cpp-client"


def client_dir() -> Path:
    """Where the client is installed: ``$TXMQ_CPP_CLIENT``, else ``<venv>/txmq-cpp-client``."""
    return Path(os.environ.get("TXMQ_CPP_CLIENT") or Path(sys.prefix) / _DIR_NAME)


def install_hint() -> str:
    """The one line that says how to provide the client."""
    return (f"the C++-based RocketMQ client is missing: pip install --no-deps --target {client_dir()} {PIN} "
            "(scripts/bootstrap.sh does, with TXMQ_EXTRAS naming remoting)")


def load() -> ModuleType:
    """The client's ``client`` module (``TransactionMQProducer``, ``PushConsumer``, ...), imported once;
    ToolMissingError with ``install_hint`` when it is absent or its library does not load."""
    if f"{ALIAS}.client" in sys.modules:
        return sys.modules[f"{ALIAS}.client"]
    package = client_dir() / "rocketmq"
    spec = importlib.util.spec_from_file_location(ALIAS, package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    if spec is None or spec.loader is None or not (package / "__init__.py").is_file():
        raise ToolMissingError(install_hint())
    module = importlib.util.module_from_spec(spec)
    sys.modules[ALIAS] = module
    try:
        spec.loader.exec_module(module)
        return importlib.import_module(f"{ALIAS}.client")
    except (ImportError, OSError) as exc:  # librocketmq.so does not load here (another OS, a broken copy)
        sys.modules.pop(ALIAS, None)
        raise ToolMissingError(f"{install_hint()} ({exc})") from None
