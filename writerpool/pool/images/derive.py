"""Derived images: `writerpool image derive NAME`, image names in `mode set --image`, and
the check that an image carries what a `--cache` option needs."""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock

from writerpool.atomic import ensure_private_dir
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.report import Report
from writerpool.runtime.image import HEX64, resolve_image
from writerpool.runtime.image_build import Progress
from writerpool.runtime.image_derive import (
    DERIVED_REPO,
    Derived,
    DeriveSource,
    build_derived,
    image_has_command,
)
from writerpool.runtime.requirements import Requirements, RequirementsRefused, parse_requirements
from writerpool.state.images import NAME_RE, BuiltImage, check_name, load_record, record_built
from writerpool.untrusted import DocumentRefused, read_regular

TARGET = "image/derived"
# The command a cache option is for; the image must carry it.
CACHE_TOOLS = {"go": "go", "uv": "uv"}
MAX_REQUIREMENTS_BYTES = 1024 * 1024


def _regular(path: Path, what: str) -> Path:
    if not path.is_file():
        raise UsageError(f"{what} {path} is not a readable file")
    return path.resolve()


def read_requirements(path: Path) -> Requirements:
    """The requirements file, checked line by line before anything runs."""
    try:
        raw = read_regular(path, limit=MAX_REQUIREMENTS_BYTES, follow=True)
        text = raw.decode("utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"the requirements file {path} does not exist") from exc
    except DocumentRefused as exc:
        raise UsageError(f"the requirements file {path} {exc.reason}") from exc
    except OSError as exc:
        raise UsageError(f"the requirements file {path} cannot be read") from exc
    except UnicodeDecodeError as exc:
        raise RequirementsRefused("the requirements file is not UTF-8 text") from exc
    return parse_requirements(text)


def derive_source(containerfile: Path | None, context: Path | None,
                  requirements: Path | None) -> DeriveSource:  # fmt: skip
    """Check the options: one source, existing files, a context only with a Containerfile,
    and every requirement (before pip, or anything else, runs)."""
    if (containerfile is None) == (requirements is None):
        raise UsageError("give exactly one of --containerfile FILE or --requirements FILE")
    if requirements is not None:
        if context is not None:
            raise UsageError("--context goes with --containerfile only")
        return DeriveSource(requirements=read_requirements(requirements))
    assert containerfile is not None
    folder = context if context is not None else containerfile.parent
    if not folder.is_dir():
        raise UsageError(f"the build context {folder} is not a directory")
    return DeriveSource(containerfile=_regular(containerfile, "the Containerfile"),
                        context=folder.resolve())  # fmt: skip


def derive_image(paths: Paths, name: str, source: DeriveSource, progress: Progress) -> Report:
    check_name(name)
    base_id = resolve_image(paths, "default")
    ensure_private_dir(paths.image_cache_dir)
    # One derive of a name at a time: they share a work directory and the name's newest.
    with FileLock(str(paths.image_cache_dir / f"derive-{name}.lock")):
        newest = load_record(paths).named(name)
        try:
            made = build_derived(paths, name, base_id, source, progress,
                                 newest.id if newest is not None else None)  # fmt: skip
        except WriterpoolError as exc:
            if exc.code != "image_build_failed":
                raise
            raise WriterpoolError("image_derive_failed", exc.message) from exc
        record_built(paths, [BuiltImage(id=made.image_id, kind="derived", base=base_id,
                                        name=name)])  # fmt: skip
    return _report(name, base_id, made)


def _report(name: str, base_id: str, made: Derived) -> Report:
    data: dict[str, object] = {"name": name, "imageId": made.image_id, "baseId": base_id,
                               "tag": f"{DERIVED_REPO}:{name}", "reused": made.reused}  # fmt: skip
    if made.key is not None:
        data["key"] = made.key
        data["wheels"] = [{"file": w.file, "sha256": w.sha256} for w in made.wheels]
    report = Report("image derive", data=data)
    remedy = f"writerpool mode set ALIAS --image {name} --apply"
    short, base = made.image_id[:12], base_id[:12]
    if made.reused:
        report.add("image_derive_reused", "ok", f"{TARGET}/{name}",
                   f"reused {short}: it holds exactly these {len(made.wheels)} wheel(s) on the "
                   f"pinned writer image {base}; nothing built", remedy=remedy)  # fmt: skip
    else:
        wheels = f" with {len(made.wheels)} wheel(s)" if made.key is not None else ""
        report.add("image_derived", "ok", f"{TARGET}/{name}",
                   f"built {short}{wheels} from the pinned writer image {base}",
                   remedy=remedy)  # fmt: skip
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
