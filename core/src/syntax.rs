//! Command syntax as the SPEC writes it (`key holder ttl-ms [BLOCK
//! timeout-ms] [KEEP]`), read into the argument tree `COMMAND DOCS`
//! describes, and written back. Keeping the SPEC's own line as the one
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
    /// The choices of a `OneOf`.
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
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out: Vec<ArgDoc> = vec![];
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if let Some(first) = w.strip_prefix('[') {
            // An optional group: up to the word that closes it.
            let mut group = vec![first];
            while !group.last().is_some_and(|g| g.ends_with(']')) {
                i += 1;
                group.push(words.get(i).ok_or("unclosed [")?);
            }
            let last = group.len() - 1;
            group[last] = group[last].trim_end_matches(']');
            match group.as_slice() {
                [name, "..."] => {
                    let prev = out.last_mut().ok_or("... without an argument")?;
                    if prev.name != *name {
                        return Err(format!("[{name} ...] after {}", prev.name));
                    }
                    prev.multiple = true;
                }
                [kw] if is_keyword(kw) => out.push(ArgDoc {
                    optional: true,
                    ..token(kw)
                }),
                [kw, name] if is_keyword(kw) => out.push(ArgDoc {
                    token: Some(kw.to_string()),
                    optional: true,
                    ..value(name)
                }),
                other => return Err(format!("cannot read [{}]", other.join(" "))),
            }
        } else if w.contains('|') {
            out.push(ArgDoc {
                name: "mode".to_string(),
                kind: Kind::OneOf,
                choices: w.split('|').map(token).collect(),
                ..value("")
            });
        } else if is_keyword(w) {
            out.push(token(w));
        } else {
            out.push(value(w));
        }
        i += 1;
    }
    Ok(out)
}

/// Writes the tree back as the SPEC writes it.
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
