"""Derived images: `writerpool image derive NAME`, image names in `mode set --image`, and
the check that an image carries what a `--cache` option needs."""

from __future__ import annotations

from pathlib import Path

from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.report import Report
from writerpool.runtime.image import HEX64, resolve_image
from writerpool.runtime.image_build import Progress
from writerpool.runtime.image_derive import (
    DERIVED_REPO,
    DeriveSource,
    build_derived,
    image_has_command,
)
from writerpool.state.images import NAME_RE, BuiltImage, check_name, load_record, record_built

TARGET = "image/derived"
# The command a cache option is for; the image must carry it.
CACHE_TOOLS = {"go": "go", "uv": "uv"}


def _regular(path: Path, what: str) -> Path:
    if not path.is_file():
        raise UsageError(f"{what} {path} is not a readable file")
    return path.resolve()


def derive_source(containerfile: Path | None, context: Path | None,
                  requirements: Path | None) -> DeriveSource:  # fmt: skip
    """Check the options: one source, existing files, a context only with a Containerfile."""
    if (containerfile is None) == (requirements is None):
        raise UsageError("give exactly one of --containerfile FILE or --requirements FILE")
    if requirements is not None:
        if context is not None:
            raise UsageError("--context goes with --containerfile only")
        return DeriveSource(requirements=_regular(requirements, "the requirements file"))
    assert containerfile is not None
    folder = context if context is not None else containerfile.parent
    if not folder.is_dir():
        raise UsageError(f"the build context {folder} is not a directory")
    return DeriveSource(containerfile=_regular(containerfile, "the Containerfile"),
                        context=folder.resolve())  # fmt: skip


def derive_image(paths: Paths, name: str, source: DeriveSource, progress: Progress) -> Report:
    check_name(name)
    base_id = resolve_image(paths, "default")
    try:
        image_id = build_derived(paths, name, base_id, source, progress)
    except WriterpoolError as exc:
        if exc.code != "image_build_failed":
            raise
        raise WriterpoolError("image_derive_failed", exc.message) from exc
    record_built(paths, [BuiltImage(id=image_id, kind="derived", base=base_id, name=name)])
    report = Report("image derive", data={"name": name, "imageId": image_id, "baseId": base_id,
                                          "tag": f"{DERIVED_REPO}:{name}"})  # fmt: skip
    report.add("image_derived", "ok", f"{TARGET}/{name}",
               f"built {image_id[:12]} from the pinned writer image {base_id[:12]}",
               remedy=f"writerpool mode set ALIAS --image {name} --apply")  # fmt: skip
    return report


def image_setting(paths: Paths, given: str) -> str:
    """What `--image` stores: 'default', a 64-hex ID, or a derived name's current ID."""
    if given == "default" or HEX64.fullmatch(given):
        return given
    if not NAME_RE.fullmatch(given):
        raise UsageError("--image takes 'default', a derived image's name or a 64-hex image ID")
    found = load_record(paths).named(given)
    if found is None:
        raise WriterpoolError(
            "image_name_unknown",
            f"no image was derived under the name {given!r}; "
            f"run `writerpool image derive {given} …` first",
        )
    return found.id


def require_cache_tool(paths: Paths, setting: str, cache: str) -> None:
    """Refuse a cache option whose tool the image lacks (the default image has no uv, no go)."""
    tool = CACHE_TOOLS.get(cache)
    if tool is None:
        return
    image_id = resolve_image(paths, setting)
    if not image_has_command(image_id, tool):
        raise WriterpoolError(
            "cache_tool_missing",
            f"--cache {cache} is for `{tool}`, and the image {image_id[:12]} has no `{tool}` "
            f"on its PATH (the default image carries pip and venv, not {tool}); derive an "
            f"image that carries it (`writerpool image derive`, docs/image.md) and pass it "
            f"with --image, or use --cache none",
        )
