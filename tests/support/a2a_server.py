"""A real a2a-sdk server on 127.0.0.1 with one tiny streaming agent (``python -m tests.support.a2a_server``).

The SDK's own JSON-RPC routes (``create_jsonrpc_routes``) and ``DefaultRequestHandler``
in a Starlette app under uvicorn, bound to port 0 by this process; the startup line
"a2a server on http://HOST:PORT" gives the address (tests/support/processes.py reads it).
The agent answers every message with a task: submitted, working ("looking it up"),
an artifact with the answer in two chunks, completed.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2

if TYPE_CHECKING:
    from starlette.applications import Starlette

RPC_PATH = "/a2a"
ANSWER = ["The answer", " is 42"]


class Answerer(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or a2a_pb2.Task(
            id=context.task_id or new_task_from_user_message(context.message).id,
            context_id=context.context_id or "", history=[context.message],
            status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_SUBMITTED))
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work(new_text_message("looking it up", context_id=task.context_id, task_id=task.id))
        for n, words in enumerate(ANSWER):
            await asyncio.sleep(0.05)
            await updater.add_artifact([a2a_pb2.Part(text=words)], artifact_id="answer", name="answer",
                                       append=n > 0, last_chunk=n == len(ANSWER) - 1)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def app() -> Starlette:
    from starlette.applications import Starlette

    card = a2a_pb2.AgentCard(name="answerer", description="answers with 42", version="1.0",
                             capabilities=a2a_pb2.AgentCapabilities(streaming=True))
    handler = DefaultRequestHandler(agent_executor=Answerer(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=create_jsonrpc_routes(handler, RPC_PATH))


def main() -> None:
    import uvicorn

    sock = socket.create_server(("127.0.0.1", 0))
    host, port = sock.getsockname()[:2]
    print(f"a2a server on http://{host}:{port}", flush=True)
    config = uvicorn.Config(app(), log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
