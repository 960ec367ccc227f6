"""images.json: the IDs of the images this install of writerpool built, recorded at build
time.

Prune and uninstall remove only these. Labels cannot say which images writerpool made:
an image built `FROM` the writer image inherits every label of it. Nor can tags say which
install made one: every install of one account shares Podman's storage, so an image a
build reused (found by its tag, made by another install) is recorded as `found` and is
never removed from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.untrusted import DocumentRefused, loads_json, read_regular

HEX64 = r"^[0-9a-f]{64}$"
# A derived image's name: what `mode set --image` takes besides 'default' and an ID.
NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
DerivedName = Annotated[str, StringConstraints(pattern=NAME_RE.pattern)]
Kind = Literal["rootfs", "writer", "derived"]


class BuiltImage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(pattern=HEX64)
    kind: Kind
    # The image it was built on (a writer image's root file system, a derived image's
    # writer image); prune keeps the base of every image it keeps.
    base: str | None = Field(default=None, pattern=HEX64)
    name: DerivedName | None = None
    # Reused, not built, by this install: another install of the account may pin it.
    found: Literal[True] | None = None


class ImageRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_version: Literal[1] = Field(default=1, alias="schemaVersion")
    images: tuple[BuiltImage, ...] = ()

    def by_id(self) -> dict[str, BuiltImage]:
        return {i.id: i for i in self.images}

    def found_ids(self) -> set[str]:
        """Images this install reused but did not build: never removed from here."""
        return {i.id for i in self.images if i.found}

    def named(self, name: str) -> BuiltImage | None:
        """The newest image derived under name (the record keeps build order)."""
        found = [i for i in self.images if i.kind == "derived" and i.name == name]
        return found[-1] if found else None


def record_file(paths: Paths) -> Path:
    return paths.state_dir / "images.json"


def _file(paths: Paths) -> str:
    return str(record_file(paths))


def load_record(paths: Paths) -> ImageRecord:
    """The recorded images; a missing file records nothing, a corrupt one raises."""
    try:
        raw = read_regular(paths.state_dir / "images.json")
        return ImageRecord.model_validate(loads_json(raw))
    except FileNotFoundError:
        return ImageRecord()
    except (DocumentRefused, OSError, ValueError, ValidationError) as exc:
        raise WriterpoolError(
            "image_record_invalid",
            f"{_file(paths)} is unreadable or invalid; move it aside and rebuild with "
            "`writerpool image build` (images it named are no longer pruned)",
        ) from exc


def _save(paths: Paths, record: ImageRecord) -> None:
    text = json.dumps(record.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2)
    write_atomic(paths.state_dir / "images.json", (text + "\n").encode(), mode=0o600)


def record_built(paths: Paths, built: Iterable[BuiltImage]) -> None:
    """Add images (an ID recorded again moves to the end: the newest of its name). An
    image this install built stays built when a later build finds and reuses it."""
    ensure_private_dir(paths.state_dir)
    with FileLock(_file(paths) + ".lock"):
        old = load_record(paths).by_id()
        # A reused image is recorded again without its base: keep the base known before.
        new = [_merged(i, old.get(i.id)) for i in built]
        ids = {i.id for i in new}
        kept = [i for i in old.values() if i.id not in ids]
        _save(paths, ImageRecord(images=(*kept, *new)))


def _merged(new: BuiltImage, old: BuiltImage | None) -> BuiltImage:
    if old is None:
        return new
    found = True if new.found and old.found else None
    return new.model_copy(update={"base": new.base or old.base, "found": found})


def forget(paths: Paths, image_ids: Iterable[str]) -> None:
    """Drop removed (or vanished) images from the record."""
    gone = set(image_ids)
    if not gone or not (paths.state_dir / "images.json").exists():
        return
    with FileLock(_file(paths) + ".lock"):
        record = load_record(paths)
        _save(paths, ImageRecord(images=tuple(i for i in record.images if i.id not in gone)))


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise UsageError(
            "an image name is a lowercase letter, then up to 62 of a-z 0-9 _ . - "
            "('default' and 64-hex IDs are taken)"
        )
    if name == "default" or re.fullmatch(HEX64, name):
        raise UsageError(f"{name!r} cannot name a derived image")
    return name
