//! API runners (docs/api-runners.md): a runner table entry that asks a model API over
//! HTTP instead of starting a CLI. Its settings and their checks (`spec`), the two
//! protocols' requests, replies, usage and reasons (`protocol`), the key masked out
//! of whatever a server sends back (`key_mask`), and when a failed request is sent
//! again (`retry`).

pub mod key_mask;
pub mod protocol;
pub mod retry;
pub mod spec;
