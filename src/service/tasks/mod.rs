//! Agent Protocol tasks: a task runs on an agent network, each step is one
//! chat turn of it ([`step`]), and what a step writes out is an artifact
//! ([`artifacts`]). Tasks, steps and artifact metadata are facts of the
//! caller's tenant ([`store`]), so a task's history is data that can be read
//! as of any time.

pub mod artifacts;
pub mod step;
pub mod store;

pub use store::*;
