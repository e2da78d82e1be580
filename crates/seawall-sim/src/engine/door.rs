//! A record of what one tier's door did — arrivals, admissions, queueing, refusals, slots freed,
//! cancellations — in the order the engine did it, for a caller that wants to check the
//! simulator's server against another implementation of the same door (`ShedLayer`, request
//! by request). Off unless asked for ([`door_trace`](crate::door_trace)): each site is then one
//! branch.

use super::Sim;
use super::slab::Id;

/// What happened at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// A request arrived: its attempt number (1 = first) and the deadline it carries, in
    /// nanoseconds of simulated time, if it carries one.
    Arrived {
        /// The attempt number the request says (`Request-Attempt`).
        attempt: u32,
        /// Its deadline (absolute, in simulated nanoseconds), if it has one.
        deadline_ns: Option<u64>,
    },
    /// The request took a slot and its handler started.
    Admitted,
    /// The request waits for a slot.
    Queued,
    /// The door answered the request itself, with this status (503 shed, 504 expired), on
    /// arrival or after it waited.
    Refused {
        /// The HTTP status of the answer.
        status: u16,
    },
    /// The request freed its slot: when its handler ends under `server_slot = "handler"`
    /// (`ShedLayer`'s lifetime), when its own work ends under `"service"`, even though it
    /// still waits for its calls downstream.
    Finished,
    /// The tier answered a request it had admitted (its handler returned).
    Answered,
    /// The request's caller went away (its attempt timed out or its call ended): its place in
    /// the queue or its slot is given up.
    Cancelled,
}

/// One entry of a door's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorEvent {
    /// When, in nanoseconds of simulated time.
    pub t_ns: u64,
    /// The request (one attempt at the tier), unique within a run.
    pub request: u64,
    /// What happened.
    pub what: Door,
}

/// The record of one server's door.
#[derive(Debug, Default)]
pub(crate) struct DoorLog {
    pub(crate) server: usize,
    pub(crate) events: Vec<DoorEvent>,
}

impl Sim<'_> {
    /// Notes `what` for `job` at `server`'s door, if that door is being recorded.
    #[inline]
    pub(super) fn door(&mut self, server: usize, job: Id, what: Door) {
        if let Some(log) = &mut self.door_log
            && log.server == server
        {
            log.events.push(DoorEvent { t_ns: self.now, request: job.to_bits(), what });
        }
    }
}
