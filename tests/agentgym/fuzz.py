"""Random and malformed requests for an env server (`fuzz`), seeded, with what each one was.

Each request picks a method and path (the env's own routes under its prefix, the shared ones, or an unknown
path), then a body: valid-looking bodies with ids that exist, ids that do not, task ids in and out of range,
random actions (unicode, empty, long), wrong types (strings, floats, booleans, lists, null for ints), missing and
extra keys, nested junk, bare JSON values, bytes that are not JSON, and a wrong content type.  Query strings get
the same treatment.  A server passes when it answers every request with a status below 500, or 503 (the env cap).
"""

from __future__ import annotations

import http.client
import json
import random
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlencode, urlsplit

from agentgym.spec import EnvSpec

ROUTES = (
    ("POST", "/create"),
    ("POST", "/reset"),
    ("POST", "/step"),
    ("POST", "/close"),
    ("GET", "/observation"),
    ("GET", "/list_envs"),
    ("GET", "/"),
)
WEIRD_TEXT = [
    "",
    " ",
    "\x00",
    "é" * 30,
    "😀 go",
    "search[" * 50,
    "\n\n\n",
    "a" * 5000,
    "{}",
    "null",
    "-1",
    "click[buy now]",
    "move up",
    "look around",
    "up",
]


@dataclass
class Outcome:
    method: str
    path: str
    body: str
    status: int


def _junk(rng: random.Random, depth: int = 0) -> Any:
    kinds: list[Callable[[], Any]] = [
        lambda: rng.randint(-(10**12), 10**12),
        lambda: rng.random() * 1e6,
        lambda: rng.choice(WEIRD_TEXT),
        lambda: None,
        lambda: rng.choice([True, False]),
        lambda: 2**70,
    ]
    if depth < 2:
        kinds += [
            lambda: [_junk(rng, depth + 1) for _ in range(rng.randint(0, 3))],
            lambda: {rng.choice(["id", "env_idx", "x", ""]): _junk(rng, depth + 1) for _ in range(rng.randint(0, 3))},
        ]
    return rng.choice(kinds)()


class Fuzzer:
    """Requests against the server at ``url`` for env ``spec``; ``known_ids`` grows as creates succeed.
    ``close_known=False`` keeps every created env open (for envs that are slow to create);
    ``valid_task_share`` is the share of ``/reset`` bodies that name a real task."""

    def __init__(
        self,
        spec: EnvSpec,
        url: str,
        seed: int,
        task_ids: list[int],
        close_known: bool = True,
        valid_task_share: float = 0.6,
    ) -> None:
        self.spec, self.rng = spec, random.Random(seed)
        self.close_known = close_known  # False: /close only ever names ids that do not exist
        self.valid_task_share = valid_task_share  # of /reset bodies with a real task id (slow to load for some envs)
        self.task_ids = task_ids
        self.known_ids: list[int] = []
        # one kept-alive connection through the standard library: a request costs the client about an eighth of
        # the CPU it costs through `requests`, so the fuzzing spends its time on the server's answers
        self.http = http.client.HTTPConnection(urlsplit(url).netloc, timeout=120)

    def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        """One request on the kept-alive connection, opened again once if the server had closed it."""
        try:
            return self._round_trip(method, path, data, headers)
        except ConnectionError:  # http.client's RemoteDisconnected included
            self.http.close()
            return self._round_trip(method, path, data, headers)

    def _round_trip(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        self.http.request(method, path, body=data, headers=headers)
        answer = self.http.getresponse()
        return answer.status, answer.read()

    def _id(self) -> Any:
        r = self.rng.random()
        if r < 0.6 and self.known_ids:
            return self.rng.choice(self.known_ids)
        if r < 0.8:
            return self.rng.randint(-5, 10**6)
        return _junk(self.rng)

    def _body(self, route: str) -> Any:
        rng, id_field = self.rng, self.spec.id_field
        r = rng.random()
        if r < 0.1:
            return _junk(rng)
        body: dict[str, Any] = {id_field: self._id()}
        if route == "/close" and not self.close_known and body[id_field] in self.known_ids:
            body[id_field] = -1
        if route == "/reset":
            task = rng.choice(self.task_ids) if rng.random() < self.valid_task_share else _junk(rng)
            body[self.spec.reset_field] = task
            body.update(self.spec.reset_extra)
        elif route == "/step":
            body["action"] = rng.choice(WEIRD_TEXT) if rng.random() < 0.8 else _junk(rng)
        if rng.random() < 0.2:
            body.pop(rng.choice(list(body)))
        if rng.random() < 0.1:
            body[rng.choice(["extra", "", "id", "env_idx"])] = _junk(rng)
        return body

    def one(self) -> Outcome:
        rng = self.rng
        method, route = (
            rng.choice(ROUTES)
            if rng.random() < 0.95
            else (rng.choice(["GET", "POST", "PUT", "DELETE"]), rng.choice(["/nope", "/step/1", "//", "/%00"]))
        )
        path = ("" if route == "/" else self.spec.prefix) + route
        headers = {"content-type": "application/json"}
        params = None
        if method == "GET":
            params = {self.spec.id_field: self._id()} if rng.random() < 0.9 else {"junk": "1"}
            data = None
        else:
            shape = rng.random()
            if shape < 0.08:
                data = rng.choice([b"{", b"\xff\xfe", b"", b"[1,2", b'{"id": }', b"nan"])
            else:
                data = json.dumps(self._body(route)).encode()
            if rng.random() < 0.05:
                headers = {"content-type": rng.choice(["text/plain", "application/x-www-form-urlencoded"])}
        status, body = self._send(method, path + ("?" + urlencode(params, doseq=True) if params else ""), data, headers)
        if route == "/create" and status == 200:
            answer = json.loads(body)
            self.known_ids.append(answer if isinstance(answer, int) else answer["id"])
        return Outcome(method, path, (data or b"")[:200].decode("utf-8", "replace") if data else str(params), status)
