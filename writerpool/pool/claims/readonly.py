"""A read-only session's throwaway container on a writer host: its image checked there,
its spec, the argv pi is started with, and its removal when `--rm` did not (pi killed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.pool.writer.container import readonly_spec, writer_image
from writerpool.pool.writer.sweep import remove_session_containers
from writerpool.runtime.host import WriterHost
from writerpool.runtime.hosts import open_host


@dataclass(frozen=True)
class ReadonlyContainer:
    host: WriterHost
    image_id: str
    session_id: str

    @classmethod
    def prepare(cls, paths: Paths, image: str, session_id: str) -> ReadonlyContainer:
        """On the local host (read-only sessions read the operator's checkout, which is
        there); the image is checked before anything is made for the session."""
        host = open_host()
        return cls(host, writer_image(paths, host, image), session_id)

    def agent_argv(
        self, *, checkout: Path, agent_dir: Path, egress_dir: Path, pool: Pool, command: list[str]
    ) -> list[str]:
        spec = readonly_spec(
            image_id=self.image_id, session_id=self.session_id, checkout=checkout,
            agent_dir=agent_dir, egress_dir=egress_dir, pool=pool, facts=self.host.facts(),
        )  # fmt: skip
        return self.host.attach_argv(spec, command)

    def agent_env(self) -> dict[str, str]:
        return self.host.attach_env()

    def remove(self) -> None:
        remove_session_containers(self.host, self.session_id)
