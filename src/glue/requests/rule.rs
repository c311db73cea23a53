//! Which of an effect's own fields a request's reply is: what lets the
//! request-id ride on the effect (`piggy`) and be remembered on a replica
//! with the reply the master gave.

use std::ffi::CStr;

use crate::core::ids::Answer;

/// Which field of the effect the reply is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Fence,
    Count,
    Permits,
    Holds,
    One,
}

impl Rule {
    /// The rule of a command's reply, by its name in lower case; None: not
    /// one of its effect's fields.
    pub fn of(command: &[u8]) -> Option<Rule> {
        const RULES: [(&[u8], Rule); 10] = [
            (b"lock.acquire", Rule::Fence),
            (b"rwlock.acquire", Rule::Fence),
            (b"lock.reenter", Rule::Count),
            (b"lock.release", Rule::Count),
            (b"sem.acquire", Rule::Permits),
            (b"sem.release", Rule::Permits),
            (b"rwlock.release", Rule::Holds),
            (b"lock.extend", Rule::One),
            (b"sem.extend", Rule::One),
            (b"rwlock.extend", Rule::One),
        ];
        RULES
            .iter()
            .find(|(name, _)| *name == command)
            .map(|(_, r)| *r)
    }

    pub fn word(self) -> &'static CStr {
        match self {
            Rule::Fence => c"fence",
            Rule::Count => c"count",
            Rule::Permits => c"permits",
            Rule::Holds => c"holds",
            Rule::One => c"one",
        }
    }

    /// Every rule, in a fixed order (the rider keeps a rule as its place).
    pub const ALL: [Rule; 5] = [
        Rule::Fence,
        Rule::Count,
        Rule::Permits,
        Rule::Holds,
        Rule::One,
    ];

    pub fn parse(word: &[u8]) -> Option<Rule> {
        Rule::ALL
            .into_iter()
            .find(|r| r.word().to_bytes().eq_ignore_ascii_case(word))
    }
}

/// An effect's fields, as a kind names them for the rules.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fields {
    pub fence: u64,
    pub count: u64,
    pub reads: u64,
    pub writes: u64,
}

impl Fields {
    pub fn answer(&self, rule: Rule) -> Answer {
        let i = |v: u64| v as i64;
        match rule {
            Rule::Fence => Answer::Int(i(self.fence)),
            Rule::Count | Rule::Permits => Answer::Int(i(self.count)),
            Rule::Holds => Answer::Ints(Box::new([i(self.reads), i(self.writes)])),
            Rule::One => Answer::Int(1),
        }
    }
}
