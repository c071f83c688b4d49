# fish completion for tokterm. Installed as $(datadir)/fish/vendor_completions.d/tokterm.fish.

function __tokterm_profiles
    set -l cfg (set -q XDG_CONFIG_HOME; and echo $XDG_CONFIG_HOME; or echo $HOME/.config)/tokterm/config
    test -r $cfg; or return
    sed -n 's/^[[:space:]]*\[\(profile[[:space:]]\{1,\}\)\{0,1\}\([^]]*\)\].*/\2/p' $cfg | grep -vx default | grep -v '^\(role\|mcp\)[[:space:]]'
end

function __tokterm_mcp
    set -l cfg (set -q XDG_CONFIG_HOME; and echo $XDG_CONFIG_HOME; or echo $HOME/.config)/tokterm/config
    test -r $cfg; or return
    sed -n 's/^[[:space:]]*\[mcp[[:space:]]\{1,\}\([^]]*\)\].*/\1/p' $cfg
end

function __tokterm_roles
    tokterm roles 2>/dev/null | awk '{ name = $1; src = $2; $1 = $2 = ""; sub(/^ +/, ""); print name "\t" src ": " $0 }'
end

function __tokterm_ids
    tokterm ls --limit 100 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { id = $1; $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print id "\t" $0 }'
end

set -l subs count ls show search export rm rename stats cache models roles mcp doctor batch help version
set -l nosub "not __fish_seen_subcommand_from $subs"

complete -c tokterm -f
complete -c tokterm -n $nosub -s p -l prompt -r -d 'the prompt (repeat for more turns)'
complete -c tokterm -n $nosub -s f -l file -r -F -d 'attach a file (text, image, PDF; repeatable)'
complete -c tokterm -n $nosub -s m -l model -r -d 'model'
complete -c tokterm -n $nosub -s s -l system -r -d 'system prompt'
complete -c tokterm -n $nosub -s P -l profile -x -a '(__tokterm_profiles)' -d 'config profile'
complete -c tokterm -n $nosub -l role -x -a '(__tokterm_roles)' -d 'a role: preset prompt and settings'
complete -c tokterm -n $nosub -l mcp -x -a '(__tokterm_mcp)' -d "let the model call an MCP server's tools"
complete -c tokterm -n $nosub -l base-url -x -d 'API base URL'
complete -c tokterm -n $nosub -l api -x -a 'openai anthropic gemini responses' -d 'the provider protocol'
complete -c tokterm -n $nosub -l max-tokens -x -d 'limit the answer length'
complete -c tokterm -n $nosub -s t -l temperature -x -d 'sampling temperature (0..2)'
complete -c tokterm -n $nosub -l top-p -x -d 'nucleus sampling (0..1)'
complete -c tokterm -n $nosub -l seed -x -d 'sample repeatably with this seed'
complete -c tokterm -n $nosub -l reasoning-effort -x -a 'none low medium high' -d 'how hard a reasoning model thinks'
complete -c tokterm -n $nosub -l extra-body -x -d 'a JSON object merged into the request body'
complete -c tokterm -n $nosub -l render -x -a 'auto always never' -d 'the answer as rendered Markdown'
complete -c tokterm -n $nosub -l json -d 'print one JSON object at the end'
complete -c tokterm -n $nosub -l reasoning -d 'copy the reasoning to stderr'
complete -c tokterm -n $nosub -l no-usage -d 'do not ask for usage'
complete -c tokterm -n $nosub -l idle-timeout -x -d 'give up after S seconds without new text'
complete -c tokterm -n $nosub -l max-time -x -d 'give up on a request after S seconds in all'
complete -c tokterm -n $nosub -l max-answer-mb -x -d 'stop an answer past N MiB, keeping what came'
complete -c tokterm -n $nosub -l connect-timeout -x -d 'connect timeout (seconds)'
complete -c tokterm -n $nosub -l retries -x -d 'retries before the first byte'
complete -c tokterm -n $nosub -l attach-max-files -x -d 'a folder attachment takes at most N files'
complete -c tokterm -n $nosub -l attach-max-bytes -x -d 'and at most N bytes of them'
complete -c tokterm -n $nosub -l cacert -r -F -d 'trust this CA bundle'
complete -c tokterm -n $nosub -l insecure -d 'do not verify TLS certificates'
complete -c tokterm -n $nosub -l config -r -F -d 'config file'
complete -c tokterm -n $nosub -l trace -r -F -d 'write frame timing records'
complete -c tokterm -n $nosub -s c -l continue -d 'continue the most recent conversation'
complete -c tokterm -n $nosub -l conversation -x -a '(__tokterm_ids)' -d 'continue conversation ID'
complete -c tokterm -n $nosub -l db -r -F -d 'conversation database'
complete -c tokterm -n $nosub -l no-save -d 'do not save this conversation'
complete -c tokterm -n $nosub -l incognito -d 'save nothing, no response cache'
complete -c tokterm -n $nosub -l no-cache -d 'always ask the server'
complete -c tokterm -n $nosub -l cache-only -d 'answer only from the cache'
complete -c tokterm -n $nosub -s x -l execute -d 'shell-command mode: propose a command, ask, run'
complete -c tokterm -n $nosub -l dry-run -d 'with -x: only print the command'
complete -c tokterm -n $nosub -l allow-tool -x -d 'run matching tools without asking (shell: dangerous)'
complete -c tokterm -n $nosub -s h -l help -d 'show help'
complete -c tokterm -n $nosub -s V -l version -d 'version and library versions'

complete -c tokterm -n $nosub -a count -d 'count the tokens of stdin'
complete -c tokterm -n $nosub -a ls -d 'saved conversations'
complete -c tokterm -n $nosub -a show -d 'print a conversation'
complete -c tokterm -n $nosub -a search -d 'full-text search'
complete -c tokterm -n $nosub -a export -d 'export conversations'
complete -c tokterm -n $nosub -a rm -d 'delete a conversation'
complete -c tokterm -n $nosub -a rename -d 'rename a conversation'
complete -c tokterm -n $nosub -a stats -d 'usage statistics'
complete -c tokterm -n $nosub -a cache -d 'response cache'
complete -c tokterm -n $nosub -a doctor -d 'check the setup'
complete -c tokterm -n $nosub -a models -d 'the models the server offers'
complete -c tokterm -n '__fish_seen_subcommand_from models' -l json -d 'a JSON array'
complete -c tokterm -n $nosub -a roles -d 'the roles --role and /role know'
complete -c tokterm -n '__fish_seen_subcommand_from roles' -l json -d 'a JSON array'
complete -c tokterm -n $nosub -a mcp -d 'MCP servers: list their tools, call one'
complete -c tokterm -n '__fish_seen_subcommand_from mcp; and not __fish_seen_subcommand_from list call' -x -a 'list call'
complete -c tokterm -n '__fish_seen_subcommand_from list call' -x -a '(__tokterm_mcp)'
complete -c tokterm -n '__fish_seen_subcommand_from mcp' -l json -d 'JSON output'
complete -c tokterm -n '__fish_seen_subcommand_from models' -l refresh -d 'ask the server, not the cache'
complete -c tokterm -n $nosub -a batch -d 'answer every line of a JSONL file'
complete -c tokterm -n $nosub -a help -d 'show help'
complete -c tokterm -n $nosub -a version -d 'show versions'

complete -c tokterm -n '__fish_seen_subcommand_from count' -s m -l model -x -d 'model'
complete -c tokterm -n '__fish_seen_subcommand_from count' -s e -l encoding -x -a 'o200k_base cl100k_base'
complete -c tokterm -n '__fish_seen_subcommand_from count' -l ids -d 'print token ids'
complete -c tokterm -n '__fish_seen_subcommand_from ls' -l limit -x -d 'how many'
complete -c tokterm -n '__fish_seen_subcommand_from show rm rename export' -a '(__tokterm_ids)'
complete -c tokterm -n '__fish_seen_subcommand_from export' -l all -d 'every conversation'
complete -c tokterm -n '__fish_seen_subcommand_from export' -l format -x -a 'md json'
complete -c tokterm -n '__fish_seen_subcommand_from search' -l model -x -d 'only this model'
complete -c tokterm -n '__fish_seen_subcommand_from search stats' -l since -x -d 'YYYY-MM-DD'
complete -c tokterm -n '__fish_seen_subcommand_from search stats' -l until -x -d 'YYYY-MM-DD'
complete -c tokterm -n '__fish_seen_subcommand_from search' -l limit -x -d 'how many'
complete -c tokterm -n '__fish_seen_subcommand_from stats' -l json -d 'JSON output'
complete -c tokterm -n '__fish_seen_subcommand_from stats' -l format -x -a 'text json'
complete -c tokterm -n '__fish_seen_subcommand_from cache' -a 'stats clear'
complete -c tokterm -n '__fish_seen_subcommand_from doctor' -l offline -d 'skip the network checks'
complete -c tokterm -n '__fish_seen_subcommand_from doctor' -l timeout -x -d 'seconds per endpoint'
complete -c tokterm -n '__fish_seen_subcommand_from batch' -s j -l concurrency -x -d 'requests at once'
complete -c tokterm -n '__fish_seen_subcommand_from batch' -s o -l out -r -F -d 'write answers to FILE'
complete -c tokterm -n '__fish_seen_subcommand_from batch' -l resume -d 'skip ids already complete'
complete -c tokterm -n '__fish_seen_subcommand_from batch' -l remote -d "through the provider's Batch API"
complete -c tokterm -n '__fish_seen_subcommand_from batch' -l remote-poll -x -d 'seconds between looks'
complete -c tokterm -n '__fish_seen_subcommand_from batch' -l remote-status -x -d "a provider batch's state"
complete -c tokterm -n '__fish_seen_subcommand_from batch' -l remote-cancel -x -d 'cancel a provider batch'
complete -c tokterm -n '__fish_seen_subcommand_from batch' -F
