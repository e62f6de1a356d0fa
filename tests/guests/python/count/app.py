"""A hostile Python guest for the isolation test: it counts its calls and remembers every body it
has seen in module state, and refuses each request with what it counted. check_config starts the
count at 100: the state every call starts from. A fresh instance per call always says
`calls=101 seen=1`; an instance that served an earlier request would say more, one that lost the
initialised state less."""

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports.types import Invocation, PluginError_BadRequest

CALLS = 0
SEEN = []


class Lifecycle(exports.Lifecycle):
    def check_config(self) -> None:
        global CALLS
        CALLS = 100


class RequestAdapter(exports.RequestAdapter):
    def adapt_request(self, invocation: Invocation):
        global CALLS
        CALLS += 1
        SEEN.append(bytes(invocation.body))
        raise Err(PluginError_BadRequest(f"count: calls={CALLS} seen={len(SEEN)}"))
