//! Command syntax as docs/commands.md writes it (`key holder ttl-ms [BLOCK
//! timeout-ms] [KEEP]`), read into the argument tree `COMMAND DOCS`
//! describes, and written back. Keeping that line as the one
//! source means the docs cannot drift from it: the glue hands the tree to
//! Redis, and the tests read `COMMAND DOCS` back into the same line.

/// What an argument is, in `COMMAND DOCS` terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Key,
    String,
    Integer,
    /// A keyword alone (`KEEP`).
    PureToken,
    /// One of several keywords (`READ|WRITE`).
    OneOf,
    /// A keyword with arguments of its own after it (`[KEEP [MAILBOX
    /// mailbox-key]]`); they are its `choices`.
    Block,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDoc {
    pub name: String,
    pub kind: Kind,
    /// The keyword before the value (`BLOCK` of `BLOCK timeout-ms`).
    pub token: Option<String>,
    pub optional: bool,
    /// `key [key ...]`: one or more.
    pub multiple: bool,
    /// The choices of a `OneOf`, the arguments of a `Block`.
    pub choices: Vec<ArgDoc>,
}

/// Names of integer arguments; everything else lower-case but `key` is a
/// string.
const INTEGERS: &[&str] = &[
    "ttl-ms",
    "timeout-ms",
    "limit",
    "n",
    "numkeys",
    "count",
    "fence",
    "deadline-ms",
    "permits",
    "reads",
    "writes",
];

fn value(name: &str) -> ArgDoc {
    let kind = if name == "key" {
        Kind::Key
    } else if INTEGERS.contains(&name) {
        Kind::Integer
    } else {
        Kind::String
    };
    ArgDoc {
        name: name.to_string(),
        kind,
        token: None,
        optional: false,
        multiple: false,
        choices: vec![],
    }
}

fn token(word: &str) -> ArgDoc {
    ArgDoc {
        name: word.to_ascii_lowercase(),
        kind: Kind::PureToken,
        token: Some(word.to_string()),
        ..value("")
    }
}

fn is_keyword(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_uppercase()) && !word.chars().any(|c| c.is_ascii_lowercase())
}

/// Reads a syntax line (without the command name).
pub fn parse(line: &str) -> Result<Vec<ArgDoc>, String> {
    let mut words = vec![];
    for w in line.split_whitespace() {
        let body = w.trim_start_matches('[');
        words.extend(std::iter::repeat_n("[", w.len() - body.len()));
        let word = body.trim_end_matches(']');
        if !word.is_empty() {
            words.push(word);
        }
        words.extend(std::iter::repeat_n("]", body.len() - word.len()));
    }
    let mut i = 0;
    let out = sequence(&words, &mut i, false)?;
    match i < words.len() {
        true => Err("] without [".to_string()),
        false => Ok(out),
    }
}

/// The arguments from `words[*i]` up to the `]` that closes the group
/// (`inside`) or the end of the line.
fn sequence(words: &[&str], i: &mut usize, inside: bool) -> Result<Vec<ArgDoc>, String> {
    let mut out: Vec<ArgDoc> = vec![];
    while let Some(&w) = words.get(*i) {
        *i += 1;
        match w {
            "]" if inside => return Ok(out),
            "]" => {
                *i -= 1;
                return Ok(out);
            }
            "[" => {
                let group = sequence(words, i, true)?;
                optional(&mut out, group)?;
            }
            "..." => out.push(value("...")),
            w if w.contains('|') => out.push(ArgDoc {
                name: "mode".to_string(),
                kind: Kind::OneOf,
                choices: w.split('|').map(token).collect(),
                ..value("")
            }),
            w if is_keyword(w) => out.push(token(w)),
            w => out.push(value(w)),
        }
    }
    match inside {
        true => Err("unclosed [".to_string()),
        false => Ok(out),
    }
}

/// An optional group read: `[name ...]` repeats the argument before it,
/// `[KW]` is an optional keyword, `[KW value]` an optional value after its
/// keyword, and `[KW ...more]` a block of arguments after its keyword
/// (`[BLOCK timeout-ms [MAILBOX mailbox-key]]`).
fn optional(out: &mut Vec<ArgDoc>, group: Vec<ArgDoc>) -> Result<(), String> {
    let plain = |a: &ArgDoc| a.kind != Kind::PureToken && !a.optional && a.token.is_none();
    match group.as_slice() {
        [a, dots] if dots.name == "..." && plain(a) => {
            let prev = out.last_mut().ok_or("... without an argument")?;
            if prev.name != a.name {
                return Err(format!("[{} ...] after {}", a.name, prev.name));
            }
            prev.multiple = true;
        }
        [kw] if kw.kind == Kind::PureToken => out.push(ArgDoc {
            optional: true,
            ..kw.clone()
        }),
        [kw, v] if kw.kind == Kind::PureToken && plain(v) && v.kind != Kind::OneOf => {
            out.push(ArgDoc {
                token: kw.token.clone(),
                optional: true,
                ..v.clone()
            })
        }
        [kw, rest @ ..]
            if kw.kind == Kind::PureToken
                && rest.iter().any(|a| a.optional)
                && rest.iter().all(|a| a.name != "...") =>
        {
            out.push(ArgDoc {
                kind: Kind::Block,
                optional: true,
                choices: rest.to_vec(),
                ..kw.clone()
            })
        }
        other => {
            let names: Vec<&str> = other.iter().map(|a| a.name.as_str()).collect();
            return Err(format!("cannot read [{}]", names.join(" ")));
        }
    }
    Ok(())
}

/// Writes the tree back as docs/commands.md writes it.
#[cfg(test)]
pub fn render(args: &[ArgDoc]) -> String {
    let one = |a: &ArgDoc| -> String {
        let body = match (a.kind, &a.token) {
            (Kind::PureToken, Some(t)) => t.clone(),
            (Kind::OneOf, _) => a
                .choices
                .iter()
                .map(|c| c.token.clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|"),
            (Kind::Block, t) => format!("{} {}", t.clone().unwrap_or_default(), render(&a.choices)),
            (_, Some(t)) => format!("{t} {}", a.name),
            (_, None) => a.name.clone(),
        };
        let body = if a.multiple {
            format!("{body} [{} ...]", a.name)
        } else {
            body
        };
        if a.optional {
            format!("[{body}]")
        } else {
            body
        }
    };
    args.iter().map(one).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
