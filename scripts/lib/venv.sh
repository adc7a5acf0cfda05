# Sourced by the test scripts that need Python tools from PyPI.
#
# make_venv DIR REQUIREMENT...: a fresh virtualenv at DIR with the pinned
# REQUIREMENTs installed. Some distributions ship python3 without ensurepip
# (Debian without python3-venv); then the system pip installs into the venv.
make_venv() {
    local venv=$1
    shift
    rm -rf "$venv"
    local pip
    if python3 -m venv "$venv"; then
        pip=("$venv/bin/python" -m pip)
    else
        rm -rf "$venv"
        python3 -m venv --without-pip "$venv"
        pip=(python3 -m pip --python "$venv/bin/python")
    fi
    "${pip[@]}" install --quiet --disable-pip-version-check "$@"
}
