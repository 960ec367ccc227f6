# Shared by scripts/test and scripts/demo (sourced, not run).
# As root on a fresh Debian machine: bootstrap the host, copy this tree where the
# unprivileged operator account can read it, and re-run the calling script as that
# account. As any other user: make sure the virtualenv exists and is current.

WP_USER="${WRITERPOOL_USER:-writerpool}"

as_operator() {  # as_operator SCRIPT ARGS...: re-run SCRIPT from the copy, as WP_USER
    local script="$1"; shift
    local top; top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    bash "$top/scripts/bootstrap-host" "$WP_USER"
    local home; home="$(getent passwd "$WP_USER" | cut -d: -f6)"
    local copy="$home/writerpool-src"
    rm -rf "$copy.new"
    mkdir -p "$copy.new"
    tar -C "$top" --exclude=./.git --exclude=./.venv --exclude='*/__pycache__' -cf - . \
        | tar -C "$copy.new" -xf -
    rm -rf "$copy" && mv "$copy.new" "$copy"
    chown -R "$WP_USER:$WP_USER" "$copy"
    local uid; uid="$(id -u "$WP_USER")"
    local keep=()
    for var in CI SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO PIP_CERT \
               REQUESTS_CA_BUNDLE ANTHROPIC_API_KEY OPENAI_API_KEY WRITERPOOL_BENCH_QUICK \
               WRITERPOOL_TEST_WORKERS \
               WRITERPOOL_BENCH_NODE_BEFORE WRITERPOOL_TESTHOST_URL WRITERPOOL_TESTHOST_IDENTITY \
               WRITERPOOL_TESTHOST_KNOWN_HOSTS WRITERPOOL_TESTHOST5_URL WRITERPOOL_TESTHOST5_IDENTITY \
               WRITERPOOL_TESTHOST5_KNOWN_HOSTS; do
        if [ -n "${!var:-}" ]; then keep+=("$var=${!var}"); fi
    done
    cd "$copy"
    exec runuser -u "$WP_USER" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
        USER="$WP_USER" LOGNAME="$WP_USER" XDG_RUNTIME_DIR="/run/user/$uid" LANG=C.UTF-8 \
        "${keep[@]}" bash "$copy/scripts/$script" "$@"
}

ensure_venv() {  # sets WP_VENV; installs writerpool (editable) with its dev tools
    local top; top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    WP_VENV="${WRITERPOOL_VENV:-$HOME/.cache/writerpool-dev/venv}"
    local stamp="$WP_VENV/.pyproject.sha256"
    local want; want="$(sha256sum "$top/pyproject.toml" | cut -d' ' -f1) $top"
    if [ ! -x "$WP_VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        /usr/bin/python3 -m venv "$WP_VENV"
        "$WP_VENV/bin/pip" install -q --upgrade pip >/dev/null
        "$WP_VENV/bin/pip" install -q -e "$top[dev]"
        echo "$want" > "$stamp"
    fi
    export PATH="$WP_VENV/bin:$PATH"
}
