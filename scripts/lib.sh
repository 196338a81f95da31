# Shared by the measurement scripts (sourced, not run).

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
