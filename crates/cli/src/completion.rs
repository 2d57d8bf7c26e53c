//! `cachalot completion SHELL` (shell completion scripts) and the hidden
//! `cachalot manpage` (roff for man(1)), both generated from the clap definitions in
//! main.rs, so they can never drift from the commands the binary accepts.
//!
//! Invariants:
//! - Neither command talks to the daemon; both write only to stdout.
//! - The bash script is clap_complete's, plus one addition: at a positional argument
//!   that names an existing pool or dataset (`pool export POOL`, `destroy NAME`,
//!   `get PROPS NAMES...`), the names the running daemon knows are offered, as zfs's
//!   completion does. Which positional takes what is derived from the same clap
//!   definitions (`positional_kinds`); with no daemon reachable nothing extra is
//!   offered, within 2 seconds at most.

use crate::commands::CmdResult;
use crate::Cli;
use clap::{Args, CommandFactory};
use std::io::Write;

#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// Shell to generate the script for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// What a positional argument completes to, beyond what clap_complete offers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NameKind {
    /// Nothing from the daemon (a new name, a path, a property, a statistic).
    Other,
    /// An imported pool.
    Pool,
    /// An existing filesystem, volume or snapshot.
    Dataset,
}

impl NameKind {
    fn word(self) -> &'static str {
        match self {
            NameKind::Other => "-",
            NameKind::Pool => "pool",
            NameKind::Dataset => "dataset",
        }
    }
}

/// Commands whose positionals name something that does not exist yet (or a pool
/// that is not imported), so the daemon's names would be wrong suggestions.
const NEW_NAME_COMMANDS: &[&str] = &["pool create", "pool import", "create", "receive"];

/// The kind of positional `id` of the command at `path` ("pool export", "get").
fn positional_kind(path: &str, id: &str) -> NameKind {
    if NEW_NAME_COMMANDS.contains(&path) || path.starts_with("debug") {
        return NameKind::Other;
    }
    match id {
        "pool" if path.starts_with("pool ") => NameKind::Pool,
        "name" | "names" | "snapshot" | "fs" | "datasets" => NameKind::Dataset,
        // set PROP=VAL... NAME: names that do not match a PROP=VAL prefix drop out.
        "args" if path == "set" => NameKind::Dataset,
        _ => NameKind::Other,
    }
}

/// One line per command that has positionals: `PATH<TAB>KIND KIND...[+]<TAB>OPTS`,
/// where KIND is the kind of each positional in order, a trailing `+` means the last
/// one repeats, and OPTS are the options that take a value (their value is not a
/// positional).
fn positional_table(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    let positionals: Vec<&clap::Arg> = cmd.get_positionals().collect();
    if !positionals.is_empty() {
        let mut kinds: Vec<&str> = positionals
            .iter()
            .map(|a| positional_kind(path, a.get_id().as_str()).word())
            .collect();
        let repeats = positionals
            .last()
            .and_then(|a| a.get_num_args())
            .is_some_and(|n| n.max_values() > 1);
        if repeats {
            kinds.push("+");
        }
        let value_opts: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_positional() && a.get_action().takes_values())
            .flat_map(|a| {
                let short = a.get_short().map(|c| format!("-{c}"));
                let long = a.get_long().map(|l| format!("--{l}"));
                short.into_iter().chain(long)
            })
            .collect();
        out.push(format!(
            "{path}\t{}\t{}",
            kinds.join(" "),
            value_opts.join(" ")
        ));
    }
    for sub in cmd.get_subcommands() {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        positional_table(sub, &sub_path, out);
    }
}

/// Command paths that have subcommands ("pool", "mysql", ...), space-separated.
fn command_groups(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    for sub in cmd.get_subcommands() {
        let sub_path = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        if sub.has_subcommands() {
            out.push(sub_path.clone());
            command_groups(sub, &sub_path, out);
        }
    }
}

/// The bash code appended to clap_complete's script: the tables above and a wrapper
/// around its `_cachalot` function that adds the daemon's names.
fn bash_names(cmd: &clap::Command) -> String {
    let mut table = Vec::new();
    positional_table(cmd, "", &mut table);
    let mut groups = Vec::new();
    command_groups(cmd, "", &mut groups);
    let mut s = String::from(
        "\n# Added by cachalot: pool and dataset names from the running daemon.\n\
         # Each line: command path, kinds of its positionals, options that take a value.\n\
         _CACHALOT_POSITIONALS='\n",
    );
    for line in table {
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str("'\n_CACHALOT_GROUPS='|");
    s.push_str(&groups.join("|"));
    s.push_str("|'\n");
    s.push_str(BASH_WRAPPER);
    s
}

const BASH_WRAPPER: &str = r#"
# _cachalot_row CMD_PATH: that command's line of _CACHALOT_POSITIONALS.
_cachalot_row() {
    awk -F'\t' -v p="$1" '$1 == p { print; exit }' <<<"$_CACHALOT_POSITIONALS"
}

# _cachalot_names_for CMD_PATH N_POSITIONALS_BEFORE_CURSOR [--socket PATH]: prints the
# daemon's names fitting that positional (nothing if it does not answer within 2 s).
_cachalot_names_for() {
    local kinds kind= n=$2 exe=${COMP_WORDS[0]}
    IFS=$'\t' read -r _ kinds _ <<<"$(_cachalot_row "$1")"
    read -r -a kinds <<<"$kinds"
    ((${#kinds[@]} > 0)) || return 0
    if ((n < ${#kinds[@]})) && [[ ${kinds[n]} != + ]]; then
        kind=${kinds[n]}
    elif [[ ${kinds[-1]} == + ]]; then
        kind=${kinds[-2]}
    fi
    shift 2
    case $kind in
        pool) timeout 2 "$exe" "$@" pool list -H 2>/dev/null | cut -f1 ;;
        dataset) timeout 2 "$exe" "$@" list -H -o name -t all 2>/dev/null ;;
    esac
}

_cachalot_with_names() {
    _cachalot "$@"
    local cur=${COMP_WORDS[COMP_CWORD]} i w path= npos=0 skip=0 opts sock=()
    [[ $cur == -* ]] && return 0
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if ((skip)); then
            skip=0
            continue
        fi
        if [[ $w == --socket ]]; then
            sock=(--socket "${COMP_WORDS[i + 1]}")
            skip=1
            continue
        fi
        if [[ $w == -* ]]; then
            opts=" $(_cachalot_row "$path" | cut -f3) "
            [[ $w != *=* && $opts == *" $w "* ]] && skip=1
            continue
        fi
        if [[ -z $path || $_CACHALOT_GROUPS == *"|$path|"* ]]; then
            path=${path:+$path }$w
        else
            npos=$((npos + 1))
        fi
    done
    [[ -n $path ]] || return 0
    local names
    names=$(_cachalot_names_for "$path" "$npos" "${sock[@]}")
    [[ -n $names ]] || return 0
    while IFS= read -r w; do
        COMPREPLY+=("$w")
    done < <(compgen -W "$names" -- "$cur")
}
complete -F _cachalot_with_names -o bashdefault -o default cachalot
"#;

/// Print the completion script for `args.shell`.
pub fn completion(args: &CompletionArgs) -> CmdResult {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "cachalot", &mut script);
    if args.shell == clap_complete::Shell::Bash {
        script.extend_from_slice(bash_names(&cmd).as_bytes());
    }
    write_stdout(&script)
}

/// Print the man page (section 8: the binary is the system daemon and its admin tool).
pub fn manpage() -> CmdResult {
    let cmd = Cli::command().name("cachalot");
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("8")
        .manual("Cachalot")
        .render(&mut page)
        .map_err(|e| format!("manpage: {e}"))?;
    write_stdout(&page)
}

fn write_stdout(bytes: &[u8]) -> CmdResult {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<String> {
        let mut t = Vec::new();
        positional_table(&Cli::command(), "", &mut t);
        t
    }

    fn row<'a>(t: &'a [String], path: &str) -> &'a str {
        t.iter()
            .find(|l| l.split('\t').next() == Some(path))
            .unwrap_or_else(|| panic!("no row for {path:?} in {t:#?}"))
    }

    #[test]
    fn positionals_that_name_existing_things() {
        let t = table();
        assert!(row(&t, "pool export").starts_with("pool export\tpool\t"));
        assert!(row(&t, "destroy").starts_with("destroy\tdataset\t"));
        // get PROPS NAMES...: a property first, then any number of datasets.
        assert!(row(&t, "get").starts_with("get\t- dataset +\t"));
        // mount NAME [PATH]: the path is the shell's (file names).
        assert!(row(&t, "mount").starts_with("mount\tdataset -\t"));
        // New names are not suggested from the existing ones.
        assert!(row(&t, "create").starts_with("create\t-\t"));
        assert!(row(&t, "pool create").starts_with("pool create\t- - +\t"));
    }

    #[test]
    fn value_options_are_listed() {
        let t = table();
        let create = row(&t, "create");
        let opts: Vec<&str> = create.rsplit('\t').next().unwrap().split(' ').collect();
        for o in ["-o", "-V", "-b"] {
            assert!(opts.contains(&o), "{create}");
        }
        assert!(!opts.contains(&"-p"), "{create}");
    }

    #[test]
    fn groups_are_the_commands_with_subcommands() {
        let mut g = Vec::new();
        command_groups(&Cli::command(), "", &mut g);
        for name in ["pool", "analytics", "mysql"] {
            assert!(g.iter().any(|x| x == name), "{g:?}");
        }
        assert!(!g.iter().any(|x| x == "destroy"), "{g:?}");
    }
}
