# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_sbx_global_optspecs
    string join \n server= api-key= profile= o/output= q/quiet v/verbose h/help V/version
end

function __fish_sbx_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_sbx_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_sbx_using_subcommand
    set -l cmd (__fish_sbx_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c sbx -n "__fish_sbx_needs_command" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_needs_command" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_needs_command" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_needs_command" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_needs_command" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_needs_command" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_needs_command" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "serve" -d 'Run the API daemon (the embedded default on this host, or the Kubernetes platform)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "agent" -d 'Run the per-node agent (Kubernetes: a DaemonSet on the nodes that run sandboxes)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "login" -d 'Save a server URL and API key as a profile, after checking them with whoami'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "whoami" -d 'Show who the API key (or OIDC token) is and what it may do'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "key" -d 'Mint, list and revoke API keys (admin)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "sandbox" -d 'Manage sandboxes: create, inspect, run commands, read logs, pause, delete'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "snapshot" -d 'Manage snapshots: list, inspect, delete, restore into a new sandbox, sweep old forks'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "tenant" -d 'Create, read, update and delete tenants'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "role-bindings" -d 'Show or replace the role bindings of OIDC identities (admin)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "usage" -d 'Show usage (sandbox-seconds, vCPU-seconds, GiB-seconds, egress) over a time range'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "apply" -d 'Make the server\'s tenants, role bindings and keys what the files declare'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "diff" -d 'Show what `sbx apply -f` would change; exit 1 when something differs'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "node" -d 'Node storage pools and dedication to tenants (operator, admin)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "image" -d 'List, pull and import images on the server\'s host'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "install" -d 'Install sbx on cluster nodes (admin; Kubernetes, when turned on)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "shim" -d 'Internal: the per-sandbox shim started by `sbx serve`'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l listen -d 'Address to listen on (port 0 picks a free port) [default: 127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l data-dir -d 'Directory for the database, the admin token and sandbox files [default: /var/lib/sbx as root]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l mode -d 'development allows unscoped tenant keys; production requires tenants and sizes' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l platform -d 'Where sandboxes run: local (this host) or kubernetes' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l config -d 'TOML configuration file (see docs/configuration.md); flags and env win' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l import -d 'Import this OCI image archive into the host\'s image store at start-up (repeatable)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l log-format -d 'Log lines as text for people, or as JSON objects (one per line) for a log collector' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line: time, level, target, message and fields'"
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l listen -d 'Address to listen on (see --listen-ip)' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l listen-ip -d 'Listen on this address instead of --listen\'s (its port kept): deploy/agent.yaml passes the Pod\'s status.hostIP, the node\'s internal address (IPv4 or IPv6)' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l tls-dir -d 'Serve HTTPS with DIR/tls.crt and DIR/tls.key, only to clients with a certificate of the CA DIR/ca.crt (deploy/agent.yaml mounts the Secret sbx-agent-tls that sbx serve makes) [default: plain HTTP]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l reviews-per-minute -d 'Calls with a token that is refused (or not reviewed yet) allowed per client address and minute; beyond, 429 without asking the API server' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l node-name -d 'Name of this node (the DaemonSet passes spec.nodeName) [default: the host name]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l disk-pool -d 'Where the k7d XFS disk pool is mounted on the host' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l thin-pool -d 'The kata thin pool to report, as VG/LV [default: the first thin pool `lvs` lists]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l host-root -d 'Where the host\'s root file system is mounted when the agent runs in a container (deploy/agent.yaml: /host, with mount propagation from the host): pools are read under it and the host\'s `lvs` runs chrooted there [default: the agent runs on the host itself]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l data-dir -d 'Run the node\'s sandboxes of the `sbxd` backend, with their state in this directory on the host [default: the agent runs no sandboxes]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l oci-runtime -d 'OCI runtime of the sandboxes' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l prepared -d 'Sandboxes kept prepared ahead of creates, per shape (image, command, limits) asked for recently; 0 turns the pool off' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l network-pool -d 'Address pool of the sandboxes (each gets a /30)' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l netns-prefix -d 'Prefix of the sandboxes\' network namespaces under /run/netns' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l host-netns -d 'An existing network namespace to route the sandboxes through instead of the host\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l egress-deny -d 'Destinations no sandbox may reach whatever its egress list says (repeatable; default: RFC 1918, 100.64.0.0/10, 169.254.0.0/16, 168.63.129.16). The sandbox pool, the node\'s own addresses and link-local are refused in any case' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l insecure-registry -d 'Registry (HOST:PORT) to pull images from over plain HTTP (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l private-registry -d 'Registry (HOST[:PORT]) that may be on a loopback, private or link-local address (repeatable); every other host a pull contacts must be public' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l pod-namespace -d 'Namespace of the agent\'s Pod, where its heartbeat Lease is renewed' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l pod-name -d 'Name of the agent\'s Pod (the heartbeat Lease\'s holder) [default: the host name]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l caller -d 'Service account allowed to call, NAMESPACE/NAME (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -l enter-host -d 'Leave the container for the host before starting: join PID 1\'s mount and cgroup namespaces (the Pod needs hostPID and privileges), copy sbx to DATA_DIR/bin and run that copy, out of the Pod\'s cgroup, so that sandboxes outlive the agent\'s Pod'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -f -a "install" -d 'Check this node\'s prerequisites for sbxd and install sbx on it (remote install)'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -f -a "idle" -d 'Wait until terminated (the installer Pod\'s container once the install has run)'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and not __fish_seen_subcommand_from install idle help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l host-root -d 'Where the host\'s root file system is mounted (only PREFIX under it must be writable) [default: this is the host]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l prefix -d 'Where sbx goes on the host' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l min-kernel -d 'The oldest kernel accepted' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l node-name -d 'Name of this node [default: the host name]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l termination-log -d 'Where the failure line is also written, for the Pod\'s status' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from install" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from idle" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from help" -f -a "install" -d 'Check this node\'s prerequisites for sbxd and install sbx on it (remote install)'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from help" -f -a "idle" -d 'Wait until terminated (the installer Pod\'s container once the install has run)'
complete -c sbx -n "__fish_sbx_using_subcommand agent; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand login" -l data-dir -d 'The daemon\'s data dir, for --bootstrap [default: as sbx serve]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand login" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand login" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand login" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand login" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand login" -l bootstrap -d 'Use the first admin key that `sbx serve` wrote to its data dir on this host'
complete -c sbx -n "__fish_sbx_using_subcommand login" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand login" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand login" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand login" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand whoami" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "create" -d 'Mint a key; its token is shown once: print it, or write it to a file or a Secret'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "list" -d 'List every key, with when it was last used (never its secret)'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "ls" -d 'List every key, with when it was last used (never its secret)'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "revoke" -d 'Revoke every key with this name'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "rm" -d 'Revoke every key with this name'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l role -d 'read-only and user are scoped to a tenant; operator and admin are cluster-wide' -r -f -a "read-only\t''
user\t''
operator\t''
admin\t''"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l tenant -d 'Tenant of a read-only or user key (required in production mode)' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l expires-days -d 'Days until the key expires' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s n -l namespace -d 'Narrow the key to a namespace of its tenant (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l node -d 'Node where the key may place sandboxes (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l token-file -d 'Write the token to this new file (mode 0600) instead of printing it' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l token-secret -d 'Write the token to this Kubernetes Secret (key `token`), with your kubeconfig' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l overwrite -d 'Replace the token file or Secret when it exists'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from ls" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from revoke" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "create" -d 'Mint a key; its token is shown once: print it, or write it to a file or a Secret'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "list" -d 'List every key, with when it was last used (never its secret)'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Revoke every key with this name'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "create" -d 'Create a sandbox and wait until it is Ready'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "list" -d 'List sandboxes'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "ls" -d 'List sandboxes'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "get" -d 'Show one sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "delete" -d 'Delete sandboxes (irreversible)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "rm" -d 'Delete sandboxes (irreversible)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "delete-all" -d 'Delete every sandbox of a namespace (irreversible; asks on a terminal)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "exec" -d 'Run a command in a sandbox; exits with the command\'s exit status'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "logs" -d 'Print a sandbox\'s log, or follow it as it grows'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "cp" -d 'Copy files and directories into or out of a sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "update" -d 'Change a sandbox\'s lifetime: when it is deleted, and when it is paused for want of use'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "pause" -d 'Pause (freeze) a sandbox, optionally keeping a snapshot of its files'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "resume" -d 'Resume a paused sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "fork" -d 'Clone a sandbox into a new one with a copy of its files (and, with --warm, its processes)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "snapshot" -d 'Take a snapshot of a running sandbox without pausing it'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "metrics" -d 'CPU and memory use of the sandboxes of a namespace'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "top" -d 'CPU and memory use of the sandboxes of a namespace'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and not __fish_seen_subcommand_from create list ls get delete rm delete-all exec logs cp update pause resume fork snapshot metrics top help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l image -d 'Container image reference' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l limit -d 'Limits as KEY=VALUE[,KEY=VALUE] with keys cpu, memory, ephemeral-storage (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l env-file -d 'Env file (KEY=VALUE lines) read on the API host; a relative path is made absolute here' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s e -l env -d 'Environment variable (repeatable; over --env-file); KEY alone takes this shell\'s value. Kept as a Secret on Kubernetes, never shown again' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s l -l label -d 'Label (repeatable), listed with `sbx sandbox ls -l KEY=VALUE`' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l entrypoint -d 'Replace the image\'s entrypoint (split as a shell would; the image\'s cmd goes too unless a command follows --)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l ttl -d 'Delete the sandbox this long after its create, e.g. 30m or 2h' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l idle-timeout -d 'Pause it after this long without an exec, stream or file copy' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l before-script -d 'Shell commands run before the sandbox reads Ready' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l egress -d 'Allow egress only to this IPv4 CIDR (repeatable); without any, egress is the internet. Other sandboxes, the host, link-local and the admin\'s denied ranges stay unreachable' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l cap-add -d 'Capability to add back, e.g. NET_BIND_SERVICE (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l cap-drop -d 'Capability to drop (repeatable); the default drops ALL' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l backend -d 'Backend (default: the platform\'s)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l timeout -d 'How long to wait for Ready, e.g. 90s or 5m' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l no-egress -d 'Allow no egress at all'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l non-root -d 'Run as UID, GID and FSGroup 65532'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l container-non-root -d 'Run the container\'s user as UID 65532 (group unchanged)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l no-wait -d 'Return as soon as the server accepted the sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -l wait -d 'Wait until the sandbox is Ready (the default)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from create" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s n -l namespace -d 'Namespace to list' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s l -l selector -d 'Only those whose labels match: KEY=VALUE, KEY!=VALUE, KEY, !KEY, comma-separated' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s A -l all-namespaces -d 'List sandboxes of every namespace'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s n -l namespace -d 'Namespace to list' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s l -l selector -d 'Only those whose labels match: KEY=VALUE, KEY!=VALUE, KEY, !KEY, comma-separated' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s A -l all-namespaces -d 'List sandboxes of every namespace'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from ls" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s y -l yes -d 'Do not ask for confirmation'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from delete-all" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -l timeout -d 'Kill the command after this many seconds (exit status 124)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s i -l stdin -d 'Send this terminal\'s stdin to the command'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s t -l tty -d 'Give the command a terminal (with -i: an interactive session)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from exec" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s c -l container -d 'Container to read' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -l tail -d 'Trailing lines to print' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -l since -d 'Only lines newer than this, e.g. 10m, 1h or 30 (seconds)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s f -l follow -d 'Keep printing lines as they are written, until the sandbox stops'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from logs" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from cp" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l ttl -d 'Delete the sandbox this long from now, e.g. 90s, 30m, 2h' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l idle-timeout -d 'Pause it after this long without an exec, stream or file copy' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l no-ttl -d 'Never delete it on a timer (refused when its tenant sets a maximum TTL)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -l no-idle-timeout -d 'Never pause it for want of use'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from update" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -l snapshot -d 'Also take a `pause` snapshot, named NAME or <sandbox>-paused-<unix seconds>' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from pause" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from resume" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -l snapshot -d 'Keep the intermediate snapshot under this name (kind `named`)' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -l warm -d 'Keep the running processes too: the clone continues from the source\'s memory (CRIU checkpoint of the source, left running, restored into the clone); without it, the clone starts afresh on a copy of the source\'s files'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from fork" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from snapshot" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from metrics" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from top" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "create" -d 'Create a sandbox and wait until it is Ready'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "list" -d 'List sandboxes'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show one sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete sandboxes (irreversible)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "delete-all" -d 'Delete every sandbox of a namespace (irreversible; asks on a terminal)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "exec" -d 'Run a command in a sandbox; exits with the command\'s exit status'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "logs" -d 'Print a sandbox\'s log, or follow it as it grows'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "cp" -d 'Copy files and directories into or out of a sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "update" -d 'Change a sandbox\'s lifetime: when it is deleted, and when it is paused for want of use'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "pause" -d 'Pause (freeze) a sandbox, optionally keeping a snapshot of its files'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "resume" -d 'Resume a paused sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "fork" -d 'Clone a sandbox into a new one with a copy of its files (and, with --warm, its processes)'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "snapshot" -d 'Take a snapshot of a running sandbox without pausing it'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "metrics" -d 'CPU and memory use of the sandboxes of a namespace'
complete -c sbx -n "__fish_sbx_using_subcommand sandbox; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "list" -d 'List snapshots'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "ls" -d 'List snapshots'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "get" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "delete" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "rm" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "restore" -d 'Create a new sandbox from a snapshot'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "gc" -d 'Delete `fork` snapshots older than a threshold (pause and named snapshots are kept)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and not __fish_seen_subcommand_from list ls get delete rm restore gc help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s n -l namespace -d 'Namespace to list' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -l sandbox -d 'Only snapshots of this sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -l kind -d 'Only snapshots of this kind' -r -f -a "pause\t''
fork\t''
named\t''"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s A -l all-namespaces -d 'List snapshots of every namespace'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s n -l namespace -d 'Namespace to list' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -l sandbox -d 'Only snapshots of this sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -l kind -d 'Only snapshots of this kind' -r -f -a "pause\t''
fork\t''
named\t''"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s A -l all-namespaces -d 'List snapshots of every namespace'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from ls" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from delete" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -s n -l namespace -d 'Namespace of the sandbox' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l image -d 'Image instead of the snapshot\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l limit -d 'Limits instead of the snapshot\'s (KEY=VALUE,...; repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l before-script -d 'before_script instead of the snapshot\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l entrypoint -d 'Entrypoint instead of the image\'s (repeat for each word)' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l cmd -d 'Cmd instead of the image\'s (repeat for each word)' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -l delete-snapshot -d 'Delete the snapshot once the new sandbox is Ready'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from restore" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s n -l namespace -d 'Namespace to sweep' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -l keep-fork-for -d 'Keep fork snapshots younger than this: 10m, 2h, 45s or seconds' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s A -l all-namespaces -d 'Sweep every namespace'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -l dry-run -d 'Only report what would be deleted'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from gc" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from help" -f -a "list" -d 'List snapshots'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from help" -f -a "restore" -d 'Create a new sandbox from a snapshot'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from help" -f -a "gc" -d 'Delete `fork` snapshots older than a threshold (pause and named snapshots are kept)'
complete -c sbx -n "__fish_sbx_using_subcommand snapshot; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "list" -d 'List tenants with their usage'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "ls" -d 'List tenants with their usage'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "get" -d 'Show one tenant: spec and usage'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "create" -d 'Create a tenant'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "update" -d 'Update a tenant: each section given replaces the current one; --clear removes one'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "delete" -d 'Delete a tenant; refused while it has sandboxes unless --cascade'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "rm" -d 'Delete a tenant; refused while it has sandboxes unless --cascade'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and not __fish_seen_subcommand_from list ls get create update delete rm help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from ls" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s n -l namespace -d 'Namespace owned by the tenant, created if missing (repeatable; at least one)' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l node -d 'Node the tenant\'s sandboxes are confined to (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l default-size -d 'Size of sandboxes created without limits: cpu=1,memory=2Gi,disk=10Gi' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l quota -d 'Tenant-wide quotas: sandboxes=10,vcpu=8,memory=16Gi,disk=100Gi,snapshotStorage=50Gi' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l max-size -d 'Largest sandbox: cpu=2,memory=4Gi' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s f -l file -d 'Spec from a YAML or JSON file (`spec:` or the spec itself); flags override its sections' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from create" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s n -l namespace -d 'Namespace owned by the tenant, created if missing (repeatable; at least one)' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l node -d 'Node the tenant\'s sandboxes are confined to (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l default-size -d 'Size of sandboxes created without limits: cpu=1,memory=2Gi,disk=10Gi' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l quota -d 'Tenant-wide quotas: sandboxes=10,vcpu=8,memory=16Gi,disk=100Gi,snapshotStorage=50Gi' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l max-size -d 'Largest sandbox: cpu=2,memory=4Gi' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s f -l file -d 'Spec from a YAML or JSON file (`spec:` or the spec itself); flags override its sections' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l clear -d 'Remove a section: nodes, defaultSize, quotas or limits (repeatable)' -r -f -a "nodes\t''
defaultSize\t''
quotas\t''
limits\t''"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from update" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -l cascade -d 'Delete the tenant\'s sandboxes too'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -s y -l yes -d 'Do not ask for confirmation (--cascade asks on a terminal)'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from delete" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -l cascade -d 'Delete the tenant\'s sandboxes too'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -s y -l yes -d 'Do not ask for confirmation (--cascade asks on a terminal)'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from help" -f -a "list" -d 'List tenants with their usage'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show one tenant: spec and usage'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from help" -f -a "create" -d 'Create a tenant'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from help" -f -a "update" -d 'Update a tenant: each section given replaces the current one; --clear removes one'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Delete a tenant; refused while it has sandboxes unless --cascade'
complete -c sbx -n "__fish_sbx_using_subcommand tenant; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -f -a "get" -d 'Show the bindings (a table; -o yaml gives a document `set -f` takes back)'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -f -a "set" -d 'Replace the whole document from a YAML or JSON file'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and not __fish_seen_subcommand_from get set help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -s f -l file -d 'The document (`-` for standard input)' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from set" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from help" -f -a "get" -d 'Show the bindings (a table; -o yaml gives a document `set -f` takes back)'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from help" -f -a "set" -d 'Replace the whole document from a YAML or JSON file'
complete -c sbx -n "__fish_sbx_using_subcommand role-bindings; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l from -d 'Start of the range' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l to -d 'End of the range' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l tenant -d 'Only this tenant (a tenant-scoped key: its own, the default)' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l group-by -d 'Group rows by any of tenant, namespace, backend, state (comma-separated)' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand usage" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand usage" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand usage" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand usage" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand usage" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -s f -l filename -d 'A file, a directory of *.yaml/*.yml/*.json, or - for standard input (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l applyset -d 'Label every tenant and key applied sbx.io/apply-set=NAME: the set these files own' -r
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l token-dir -d 'Directory for the tokens of keys minted (<name>.token, mode 0600)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand apply" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l prune -d 'Remove the tenants and keys labelled with --applyset that the files no longer declare'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l cascade -d 'With --prune: delete a pruned tenant\'s sandboxes too (without it, a tenant that has sandboxes is kept and nothing is applied)'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l dry-run -d 'Print what would change; change nothing'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -l overwrite -d 'Replace a token file that exists'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand apply" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand diff" -s f -l filename -d 'A file, a directory of *.yaml/*.yml/*.json, or - for standard input (repeatable)' -r
complete -c sbx -n "__fish_sbx_using_subcommand diff" -l applyset -d 'Label every tenant and key applied sbx.io/apply-set=NAME: the set these files own' -r
complete -c sbx -n "__fish_sbx_using_subcommand diff" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand diff" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand diff" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand diff" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand diff" -l prune -d 'Remove the tenants and keys labelled with --applyset that the files no longer declare'
complete -c sbx -n "__fish_sbx_using_subcommand diff" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand diff" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand diff" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -f -a "storage" -d 'Storage pools of every node (kata thin-pool, k7d disk pool)'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -f -a "dedicate" -d 'Dedicate a node to a tenant: only its sandboxes run there, and it joins the tenant\'s nodes'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -f -a "undedicate" -d 'Undo a dedication'
complete -c sbx -n "__fish_sbx_using_subcommand node; and not __fish_seen_subcommand_from storage dedicate undedicate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from storage" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -l tenant -d 'The tenant' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from dedicate" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from undedicate" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "storage" -d 'Storage pools of every node (kata thin-pool, k7d disk pool)'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "dedicate" -d 'Dedicate a node to a tenant: only its sandboxes run there, and it joins the tenant\'s nodes'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "undedicate" -d 'Undo a dedication'
complete -c sbx -n "__fish_sbx_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -f -a "list" -d 'List the images in the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -f -a "ls" -d 'List the images in the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -f -a "pull" -d 'Pull an image from its registry into the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -f -a "import" -d 'Import the images of an OCI archive file, for hosts with no registry (operator)'
complete -c sbx -n "__fish_sbx_using_subcommand image; and not __fish_seen_subcommand_from list ls pull import help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from ls" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from pull" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from import" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the images in the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "pull" -d 'Pull an image from its registry into the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "import" -d 'Import the images of an OCI archive file, for hosts with no registry (operator)'
complete -c sbx -n "__fish_sbx_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -f -a "start" -d 'Start an install on nodes: the installer checks each node and installs sbx and its agent'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -f -a "status" -d 'Each node\'s state in an install operation: pending, running, succeeded or failed'
complete -c sbx -n "__fish_sbx_using_subcommand install; and not __fish_seen_subcommand_from start status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -l timeout -d 'How long --wait waits' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -l wait -d 'Wait until every node succeeded or failed (exit 1 when one failed)'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from start" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -l timeout -d 'How long --wait waits' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -l wait -d 'Wait until every node succeeded or failed (exit 1 when one failed)'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from help" -f -a "start" -d 'Start an install on nodes: the installer checks each node and installs sbx and its agent'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from help" -f -a "status" -d 'Each node\'s state in an install operation: pending, running, succeeded or failed'
complete -c sbx -n "__fish_sbx_using_subcommand install; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand completions" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand completions" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l id -d 'Container id' -r
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l bundle -d 'OCI bundle dir' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l runtime -d 'Runtime binary (runc or crun)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l root -d 'Runtime state root' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l log -d 'Log file' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l max-log-bytes -d 'Log size cap before rotation, bytes' -r
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l exit-file -d 'Where the exit status is recorded' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l restore-from -d 'Restore the container from this CRIU checkpoint (a warm fork) instead of creating it; the restored processes run at once' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l stdio-owner -d 'Host uid/gid of the sandbox\'s root (user namespaces): the stdio pipes are given to it, so that the sandbox\'s root can reopen them (`/proc/1/fd/1`) as host root could' -r
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l criu -d 'CRIU binary for `--restore-from`' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l criu-run -d 'For `--restore-from`: a dir of a tmpfs that the restore sees as `/run`, where CRIU keeps its kernel probe (a host whose `/run` is no tmpfs)' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand shim" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand shim" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'
token\t'A minted key\'s token alone, on one line (`sbx key create`)'"
complete -c sbx -n "__fish_sbx_using_subcommand shim" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand shim" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand shim" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand shim" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "serve" -d 'Run the API daemon (the embedded default on this host, or the Kubernetes platform)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "agent" -d 'Run the per-node agent (Kubernetes: a DaemonSet on the nodes that run sandboxes)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "login" -d 'Save a server URL and API key as a profile, after checking them with whoami'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "whoami" -d 'Show who the API key (or OIDC token) is and what it may do'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "key" -d 'Mint, list and revoke API keys (admin)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "sandbox" -d 'Manage sandboxes: create, inspect, run commands, read logs, pause, delete'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "snapshot" -d 'Manage snapshots: list, inspect, delete, restore into a new sandbox, sweep old forks'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "tenant" -d 'Create, read, update and delete tenants'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "role-bindings" -d 'Show or replace the role bindings of OIDC identities (admin)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "usage" -d 'Show usage (sandbox-seconds, vCPU-seconds, GiB-seconds, egress) over a time range'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "apply" -d 'Make the server\'s tenants, role bindings and keys what the files declare'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "diff" -d 'Show what `sbx apply -f` would change; exit 1 when something differs'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "node" -d 'Node storage pools and dedication to tenants (operator, admin)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "image" -d 'List, pull and import images on the server\'s host'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "install" -d 'Install sbx on cluster nodes (admin; Kubernetes, when turned on)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "completions" -d 'Print a shell completion script'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "shim" -d 'Internal: the per-sandbox shim started by `sbx serve`'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve agent login whoami key sandbox snapshot tenant role-bindings usage apply diff node image install completions shim help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from agent" -f -a "install" -d 'Check this node\'s prerequisites for sbxd and install sbx on it (remote install)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from agent" -f -a "idle" -d 'Wait until terminated (the installer Pod\'s container once the install has run)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from key" -f -a "create" -d 'Mint a key; its token is shown once: print it, or write it to a file or a Secret'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from key" -f -a "list" -d 'List every key, with when it was last used (never its secret)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from key" -f -a "revoke" -d 'Revoke every key with this name'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "create" -d 'Create a sandbox and wait until it is Ready'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "list" -d 'List sandboxes'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "get" -d 'Show one sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "delete" -d 'Delete sandboxes (irreversible)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "delete-all" -d 'Delete every sandbox of a namespace (irreversible; asks on a terminal)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "exec" -d 'Run a command in a sandbox; exits with the command\'s exit status'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "logs" -d 'Print a sandbox\'s log, or follow it as it grows'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "cp" -d 'Copy files and directories into or out of a sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "update" -d 'Change a sandbox\'s lifetime: when it is deleted, and when it is paused for want of use'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "pause" -d 'Pause (freeze) a sandbox, optionally keeping a snapshot of its files'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "resume" -d 'Resume a paused sandbox'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "fork" -d 'Clone a sandbox into a new one with a copy of its files (and, with --warm, its processes)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "snapshot" -d 'Take a snapshot of a running sandbox without pausing it'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from sandbox" -f -a "metrics" -d 'CPU and memory use of the sandboxes of a namespace'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from snapshot" -f -a "list" -d 'List snapshots'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from snapshot" -f -a "get" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from snapshot" -f -a "delete" -d 'Show one snapshot (or delete it)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from snapshot" -f -a "restore" -d 'Create a new sandbox from a snapshot'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from snapshot" -f -a "gc" -d 'Delete `fork` snapshots older than a threshold (pause and named snapshots are kept)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from tenant" -f -a "list" -d 'List tenants with their usage'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from tenant" -f -a "get" -d 'Show one tenant: spec and usage'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from tenant" -f -a "create" -d 'Create a tenant'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from tenant" -f -a "update" -d 'Update a tenant: each section given replaces the current one; --clear removes one'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from tenant" -f -a "delete" -d 'Delete a tenant; refused while it has sandboxes unless --cascade'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from role-bindings" -f -a "get" -d 'Show the bindings (a table; -o yaml gives a document `set -f` takes back)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from role-bindings" -f -a "set" -d 'Replace the whole document from a YAML or JSON file'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "storage" -d 'Storage pools of every node (kata thin-pool, k7d disk pool)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "dedicate" -d 'Dedicate a node to a tenant: only its sandboxes run there, and it joins the tenant\'s nodes'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "undedicate" -d 'Undo a dedication'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from image" -f -a "list" -d 'List the images in the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from image" -f -a "pull" -d 'Pull an image from its registry into the server\'s image store'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from image" -f -a "import" -d 'Import the images of an OCI archive file, for hosts with no registry (operator)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from install" -f -a "start" -d 'Start an install on nodes: the installer checks each node and installs sbx and its agent'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from install" -f -a "status" -d 'Each node\'s state in an install operation: pending, running, succeeded or failed'
