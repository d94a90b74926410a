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
yaml\t'The API\'s model as YAML'"
complete -c sbx -n "__fish_sbx_needs_command" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_needs_command" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_needs_command" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "serve" -d 'Run the API daemon (the embedded default on this host, or the Kubernetes platform)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "login" -d 'Save a server URL and API key as a profile, after checking them with whoami'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "whoami" -d 'Show who the API key (or OIDC token) is and what it may do'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "key" -d 'Mint, list and revoke API keys (admin)'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c sbx -n "__fish_sbx_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l listen -d 'Address to listen on (port 0 picks a free port) [default: 127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l data-dir -d 'Directory for the database, the admin token and sandbox files [default: /var/lib/sbx as root]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l mode -d 'development allows unscoped tenant keys; production requires tenants and sizes' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l platform -d 'Where sandboxes run: local (this host) or kubernetes' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l config -d 'TOML configuration file (keys: listen, dataDir, mode, platform); flags and env win' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'"
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand serve" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand login" -l data-dir -d 'The daemon\'s data dir, for --bootstrap [default: as sbx serve]' -r -F
complete -c sbx -n "__fish_sbx_using_subcommand login" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand login" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand login" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand login" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'"
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
yaml\t'The API\'s model as YAML'"
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
yaml\t'The API\'s model as YAML'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and not __fish_seen_subcommand_from create list ls revoke rm help" -f -a "create" -d 'Mint a key; its token is printed once, keep it safe'
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
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from create" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'"
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
yaml\t'The API\'s model as YAML'"
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
yaml\t'The API\'s model as YAML'"
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
yaml\t'The API\'s model as YAML'"
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
yaml\t'The API\'s model as YAML'"
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "create" -d 'Mint a key; its token is printed once, keep it safe'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "list" -d 'List every key, with when it was last used (never its secret)'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Revoke every key with this name'
complete -c sbx -n "__fish_sbx_using_subcommand key; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -l server -d 'URL of the sbx server [default: the profile\'s, else http://127.0.0.1:8080]' -r
complete -c sbx -n "__fish_sbx_using_subcommand completions" -l api-key -d 'API key to send (`<key_id>_<secret>`); overrides the profile\'s' -r
complete -c sbx -n "__fish_sbx_using_subcommand completions" -l profile -d 'Profile of the config file to use [default: the current profile]' -r
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s o -l output -d 'Output format: a table for people, JSON or YAML (the API\'s own models) for scripts' -r -f -a "table\t'Aligned columns for people'
wide\t'The table with more columns'
json\t'The API\'s JSON model, pretty-printed'
yaml\t'The API\'s model as YAML'"
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s q -l quiet -d 'Print only the data: no progress, no status lines'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s v -l verbose -d 'More detail on stderr (repeat for more): requests sent, timings'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sbx -n "__fish_sbx_using_subcommand completions" -s V -l version -d 'Print version'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve login whoami key completions help" -f -a "serve" -d 'Run the API daemon (the embedded default on this host, or the Kubernetes platform)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve login whoami key completions help" -f -a "login" -d 'Save a server URL and API key as a profile, after checking them with whoami'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve login whoami key completions help" -f -a "whoami" -d 'Show who the API key (or OIDC token) is and what it may do'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve login whoami key completions help" -f -a "key" -d 'Mint, list and revoke API keys (admin)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve login whoami key completions help" -f -a "completions" -d 'Print a shell completion script'
complete -c sbx -n "__fish_sbx_using_subcommand help; and not __fish_seen_subcommand_from serve login whoami key completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from key" -f -a "create" -d 'Mint a key; its token is printed once, keep it safe'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from key" -f -a "list" -d 'List every key, with when it was last used (never its secret)'
complete -c sbx -n "__fish_sbx_using_subcommand help; and __fish_seen_subcommand_from key" -f -a "revoke" -d 'Revoke every key with this name'
