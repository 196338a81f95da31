# Shared by the measurement scripts (sourced, not run).

# Sets SERVER_PIN and CLIENT_PIN: the server on core 0 and the clients on
# core 1 when there are two cores (and taskset), so that they do not take
# turns on one; empty (no pinning) otherwise. Use as "${SERVER_PIN[@]}" cmd.
pin_cores() {
    SERVER_PIN=()
    CLIENT_PIN=()
    if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null; then
        SERVER_PIN=(taskset -c 0)
        CLIENT_PIN=(taskset -c 1)
    fi
}

# Prints a loopback port below 32768 that nothing listens on; fails if none
# is found in 50 tries.
free_port() {
    local candidate
    for _ in $(seq 1 50); do
        candidate=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}
