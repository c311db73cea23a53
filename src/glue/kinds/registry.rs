//! The one list of kinds. Every registry that iterates the kinds (the
//! value lookup the engine uses, data type registration, `INFO padlock`,
//! each kind's commands and state command, `thaw`) expands it, and each
//! needs the kind's whole set of traits (`types::Value`, `kinds::Kind`,
//! `commands::Family`): a kind listed here with a part missing does not
//! compile. It sits in a file of its own, naming core types only, so the
//! data types can expand it without depending on the kinds' glue.

/// Every kind, once: `with_kinds!(m)` runs `m!(Type, ...)` with the value
/// types of all kinds. Registries that iterate the kinds (the value
/// lookup below, the `INFO` report, the state commands) expand it, so a
/// new kind is one entry here.
macro_rules! with_kinds {
    ($m:ident) => {
        $m!(
            crate::core::lock::Lock,
            crate::core::semaphore::Semaphore,
            crate::core::rwlock::RwLock
        )
    };
}
pub(crate) use with_kinds;
