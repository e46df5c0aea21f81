"""A Flower ``Grid`` that hands each message straight to a ``ClientApp`` in this process.

It runs the real strategy and the real ClientApp (mods included) without SuperLink or SuperNode
processes, so strategy behaviour (faults, joining, growing labels) is tested in seconds; the
loopback tests in ``test_flower_deployment.py`` cover the real processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from uuid import uuid4

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.serverapp import Grid
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

Tamper = Callable[[Message], Message | None]  #: ``None``: the node never replies (it died)


def over_the_wire(msg: Message) -> Message:
    """The message a node gets: ``msg`` serialized into Flower's objects and rebuilt (so nodes
    never share one object, as the workflow's messages to several nodes do here)."""
    contents = {k: obj.deflate() for k, obj in get_all_nested_objects(msg).items()}
    copy = inflate_object_from_contents(msg.object_id, contents)
    assert isinstance(copy, Message)
    copy.metadata.__dict__["_message_id"] = msg.metadata.message_id
    return copy


class DirectGrid(Grid):
    """Nodes are ``{node_id: node_config}``; ``tamper[node_id]`` may rewrite a node's replies."""

    def __init__(self, app: ClientApp, run_config: dict[str, Any]) -> None:
        TaskIdentity.run_id = 1  # what the ServerApp process is told by the SuperLink
        TaskIdentity.node_id = SUPERLINK_NODE_ID
        TaskIdentity.task_id = 1
        self.app = app
        self.run_config = run_config
        self.nodes: dict[int, Context] = {}
        self.dead: set[int] = set()
        self.tamper: dict[int, Tamper] = {}
        self.sent: list[Message] = []
        self.received: list[Message] = []  #: every reply, as the server got it
        self.replies: dict[str, Message] = {}

    def add_node(self, node_id: int, node_config: dict[str, Any]) -> None:
        """A node whose ClientApp answers in this process (no warm process of its own)."""
        self.nodes[node_id] = Context(
            run_id=1,
            node_id=node_id,
            node_config={"warm": False, **node_config},
            state=RecordDict(),
            run_config=self.run_config,
        )

    # -- Grid API --------------------------------------------------------------------------------
    def set_run(self, run: Run) -> None:  # pragma: no cover - not used by the strategy
        raise NotImplementedError

    @property
    def run(self) -> Run:  # pragma: no cover - not used by the strategy
        raise NotImplementedError

    def create_message(self, *args: Any, **kwargs: Any) -> Message:  # pragma: no cover
        raise NotImplementedError

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Deliver each message now; its reply waits for :meth:`pull_messages`."""
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = str(uuid4())
            ids.append(msg.metadata.message_id)
            self.sent.append(msg)
            node = msg.metadata.dst_node_id
            if node in self.dead or node not in self.nodes:
                continue  # no reply before the timeout
            try:
                reply = self.app(over_the_wire(msg), self.nodes[node])
            except Exception as exc:
                reply = Message(Error(code=0, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
            delivered = self.tamper.get(node, lambda m: m)(reply)
            if delivered is not None:
                self.received.append(delivered)
                self.replies[msg.metadata.message_id] = delivered
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self.replies.pop(i) for i in list(message_ids) if i in self.replies]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        return self.pull_messages(self.push_messages(messages))
