"""The writer image: its definition (images/), its inputs digest, the pin, local lookups."""

from __future__ import annotations

import hashlib
import json
import re
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from writerpool import __version__
from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.proc import CommandFailed, last_line, run
from writerpool.report import sanitize
from writerpool.runtime.image_tools import tools_digest
from writerpool.runtime.image_uv import UV_VERSION, uv_wheel
from writerpool.runtime.podman import podman_env

HEX64 = re.compile(r"^[0-9a-f]{64}$")
IMAGE_REPO = "localhost/writerpool-writer"
ROOTFS_REPO = "localhost/writerpool-rootfs"
LABEL_VERSION = "io.writerpool.version"
LABEL_INPUTS = "io.writerpool.inputs"
LABEL_ROOTFS = "io.writerpool.rootfs"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
PIN_SCHEMA_VERSION = 1
# Bumped when the way the inputs turn into an image changes (the mmdebstrap argv shape,
# the import step), so that an old image is not mistaken for a new one.
RECIPE_VERSION = 1
PODMAN_TIMEOUT = 60.0
# A session start asks for the pinned image three times within a second (readiness,
# the guard's throwaway container, the session's container), each a Podman process.
# A positive answer is reused this long: an image removed meanwhile makes the next
# `podman run --pull=never` fail, and every caller reports that failure.
EXISTS_REUSE_SECONDS = 5.0
_present_at: dict[str, float] = {}

# Where the image definition is read from. An installed wheel carries the repository's
# images/ as package data in writerpool/_images (pyproject.toml, force-include); a source
# checkout (an editable install included) has images/ beside the package.
PACKAGE_IMAGES_DIR = Path(__file__).resolve().parents[1] / "_images"
CHECKOUT_IMAGES_DIR = Path(__file__).resolve().parents[2] / "images"
DEFAULT_IMAGES_DIR = CHECKOUT_IMAGES_DIR  # the source tree's definition (what tests read)
DEFINITION_FILES = ("rootfs.toml", "Containerfile", "pi-launcher")

# Debian package names; a leading "-" could never reach mmdebstrap as an option.
PackageName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9+.-]+$")]
Suite = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")]
Mirror = Annotated[str, StringConstraints(pattern=r"^(https?|file)://[^\s,]+$")]
DpkgPath = Annotated[str, StringConstraints(pattern=r"^/[^\s]*$")]


class RootfsSpec(BaseModel):
    """images/rootfs.toml: what mmdebstrap puts into the root file system."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: Suite
    variant: Suite = "minbase"
    mirror: Mirror = DEFAULT_MIRROR
    packages: tuple[PackageName, ...] = Field(min_length=1)
    dpkg_path_exclude: tuple[DpkgPath, ...] = ()
    dpkg_path_include: tuple[DpkgPath, ...] = ()

    def canonical(self) -> dict[str, object]:
        """The values that shape the root file system; package order does not matter."""
        data = self.model_dump(mode="json")
        data["mirror"] = self.mirror.rstrip("/")
        data["packages"] = sorted(set(self.packages))
        return data


@dataclass(frozen=True)
class ImageDefinition:
    """Everything a build reads; two equal definitions build equivalent images."""

    directory: Path
    rootfs: RootfsSpec
    containerfile: bytes
    launcher: bytes
    forwarder: bytes
    pi_version: str
    writerpool_version: str
    # The pins of the agents copied in as native binaries (agent/native.py pins_text).
    agents: str = ""
    # The digest of writerpool's code the image carries (runtime/image_tools.py).
    tools: str = field(default_factory=tools_digest)

    @property
    def uv(self) -> str:
        """The pinned uv wheel for this machine: its version and SHA-256."""
        return f"{UV_VERSION}:{uv_wheel()[1]}"

    @property
    def containerfile_path(self) -> Path:
        return self.directory / "Containerfile"

    def rootfs_digest(self) -> str:
        """Names the root file system: a change only to the pi layer keeps it."""
        return _digest({"recipe": RECIPE_VERSION, "rootfs": self.rootfs.canonical()})

    def inputs_digest(self) -> str:
        """Names the finished image; it is the value of the io.writerpool.inputs label."""
        return _digest(
            {
                "recipe": RECIPE_VERSION,
                "rootfs": self.rootfs_digest(),
                "containerfile": hashlib.sha256(self.containerfile).hexdigest(),
                "launcher": hashlib.sha256(self.launcher).hexdigest(),
                "forwarder": hashlib.sha256(self.forwarder).hexdigest(),
                "tools": self.tools,
                "piVersion": self.pi_version,
                "agents": self.agents,
                "uv": self.uv,
                "writerpoolVersion": self.writerpool_version,
            }
        )

    @property
    def tag(self) -> str:
        return f"{IMAGE_REPO}:{self.writerpool_version}"


def _digest(obj: object) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def find_images_dir(
    candidates: tuple[Path, ...] = (PACKAGE_IMAGES_DIR, CHECKOUT_IMAGES_DIR),
) -> Path:
    """The installed package's image definition first, else the source checkout's."""
    for directory in candidates:
        if all((directory / name).is_file() for name in DEFINITION_FILES):
            return directory
    raise WriterpoolError(
        "image_definition_missing",
        "the writer image definition (rootfs.toml, Containerfile, pi-launcher) is not "
        "installed: neither the package's writerpool/_images nor a source checkout's images/ "
        "holds it; reinstall writerpool from its wheel (`pipx install writerpool-*.whl`, or "
        "`pip install .` in a checkout) or run it from a source checkout",
    )


def load_definition(
    pi_version: str,
    directory: Path | None = None,
    mirror: str | None = None,
    writerpool_version: str = __version__,
    agents: str = "",
) -> ImageDefinition:
    """Read the definition (rootfs.toml, Containerfile, pi-launcher, egress-forwarder)
    from directory, by default find_images_dir(); mirror overrides the file's."""
    directory = directory or find_images_dir()
    try:
        data = tomllib.loads((directory / "rootfs.toml").read_text())
        containerfile = (directory / "Containerfile").read_bytes()
        launcher = (directory / "pi-launcher").read_bytes()
        forwarder = (directory / "egress-forwarder").read_bytes()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WriterpoolError(
            "image_build_failed", f"the image definition cannot be read ({type(exc).__name__})"
        ) from exc
    if mirror is not None:
        data["mirror"] = mirror
    try:
        rootfs = RootfsSpec.model_validate(data)
    except ValidationError as exc:
        fields = ", ".join(sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]}))
        raise UsageError(f"invalid image definition or mirror: {fields or 'rootfs.toml'}") from exc
    return ImageDefinition(directory, rootfs, containerfile, launcher, forwarder, pi_version,
                           writerpool_version, agents)  # fmt: skip


# ---------------------------------------------------------------------------- the pin


class ImagePin(BaseModel):
    """The default image: state_dir/image.json."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_version: int = Field(alias="schemaVersion")
    image_id: str = Field(alias="imageId", pattern=HEX64.pattern)
    inputs_digest: str = Field(alias="inputsDigest", pattern=HEX64.pattern)
    writerpool_version: str = Field(alias="writerpoolVersion", min_length=1)

    def to_bytes(self) -> bytes:
        text = json.dumps(self.model_dump(by_alias=True), indent=2, sort_keys=True)
        return (text + "\n").encode()


def parse_pin(raw: bytes) -> ImagePin:
    """Parse a pin file's bytes; anything unexpected is image_unavailable."""
    try:
        pin = ImagePin.model_validate_json(raw)
    except ValidationError as exc:
        raise WriterpoolError(
            "image_unavailable", "the image pin is corrupt; run `writerpool image build`"
        ) from exc
    if pin.schema_version != PIN_SCHEMA_VERSION:
        raise WriterpoolError(
            "image_unavailable",
            f"the image pin has schema version {pin.schema_version}, expected "
            f"{PIN_SCHEMA_VERSION}; run `writerpool image build`",
        )
    return pin


def load_pin(paths: Paths) -> ImagePin | None:
    """The recorded default image, or None when nothing was ever pinned."""
    try:
        raw = paths.image_pin_file.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriterpoolError("image_unavailable", "the image pin cannot be read") from exc
    return parse_pin(raw)


def save_pin(
    paths: Paths, image_id: str, inputs_digest: str, version: str = __version__
) -> ImagePin:
    pin = ImagePin(
        schema_version=PIN_SCHEMA_VERSION,
        image_id=image_id,
        inputs_digest=inputs_digest,
        writerpool_version=version,
    )
    ensure_private_dir(paths.state_dir)
    write_atomic(paths.image_pin_file, pin.to_bytes(), mode=0o600)
    return pin


# ------------------------------------------------------------------- local images


class ImageInfo(BaseModel):
    """The part of `podman image inspect` / `podman images --format json` writerpool reads."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    id: str = Field(alias="Id", pattern=HEX64.pattern)
    labels: dict[str, str] | None = Field(default=None, alias="Labels")
    created: int | str | None = Field(default=None, alias="Created")

    def label(self, key: str) -> str | None:
        return (self.labels or {}).get(key)


def parse_image_list(raw: str) -> list[ImageInfo]:
    """Parse a JSON array from `podman images`/`podman image inspect` (null means empty)."""
    try:
        data = json.loads(raw or "[]") or []
        return [ImageInfo.model_validate(item) for item in data]
    except (ValueError, ValidationError) as exc:
        raise WriterpoolError("podman_unavailable", "podman printed unexpected image JSON") from exc


def _podman_failure(exc: CommandFailed) -> WriterpoolError:
    return WriterpoolError(
        "podman_unavailable", sanitize(f"podman failed: {last_line(exc.stderr)}")
    )


def _inspect(reference: str) -> ImageInfo | None:
    argv = ["podman", "image", "inspect", "--format", "json", "--", reference]
    try:
        done = run(argv, env=podman_env(), timeout=PODMAN_TIMEOUT, check=False)
    except CommandFailed as exc:  # podman missing or hung
        raise _podman_failure(exc) from exc
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").lower()
        if "image not known" in err or "no such image" in err:
            return None
        raise _podman_failure(CommandFailed(argv, done.returncode, done.stdout, done.stderr))
    found = parse_image_list(done.out)
    return found[0] if len(found) == 1 else None


def inspect_image(image_id: str) -> ImageInfo | None:
    """The local image with exactly this 64-hex ID, or None when storage lacks it."""
    if not HEX64.match(image_id):
        raise UsageError("an image must be 'default' or a 64-hex local image ID")
    info = _inspect(image_id)
    return info if info is not None and info.id == image_id else None


def image_exists(image_id: str) -> bool:
    seen = _present_at.get(image_id)
    if seen is not None and time.monotonic() - seen < EXISTS_REUSE_SECONDS:
        return True
    found = inspect_image(image_id) is not None
    if found:
        _present_at[image_id] = time.monotonic()
    else:
        _present_at.pop(image_id, None)
    return found


def tagged_image(tag: str, label: str, value: str) -> ImageInfo | None:
    """The image carrying writerpool's tag, if it is labelled label=value.

    Both are needed: a label alone is inherited by every image derived from this one
    (a `podman commit` of a writer's container carries the inputs label too).
    """
    info = _inspect(tag)
    return info if info is not None and info.label(label) == value else None


def resolve_image(paths: Paths, setting: str) -> str:
    """The 64-hex ID for an image setting ("default" = the pin), checked to exist locally
    (on this controller; a writer's host checks its own: WriterHost.ensure_image)."""
    image_id = image_setting_id(paths, setting)
    if not image_exists(image_id):
        which = "the pinned writer image" if setting == "default" else "the image"
        raise WriterpoolError(
            "image_unavailable",
            f"{which} {image_id[:12]} is not in local storage; run `writerpool image build`",
        )
    return image_id


def image_setting_id(paths: Paths, setting: str) -> str:
    """The 64-hex ID for an image setting ("default" = the pin); not looked up."""
    if setting == "default":
        pin = load_pin(paths)
        if pin is None:
            raise WriterpoolError(
                "image_unavailable", "no writer image is pinned; run `writerpool image build`"
            )
        image_id = pin.image_id
    elif HEX64.match(setting):
        image_id = setting
    else:
        raise UsageError("an image must be 'default' or a 64-hex local image ID")
    return image_id
