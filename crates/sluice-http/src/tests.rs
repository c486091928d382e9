//! Table tests across modules: heads in, outcomes out.
