//! Logging through the host's structured logs (natively, to stderr, so unit tests show it).

use crate::bindings::operator_host::reconciler::types::LogLevel;

fn emit(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::operator_host::reconciler::host_log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

/// Log at debug level.
pub fn debug(message: impl AsRef<str>) {
    emit(LogLevel::Debug, message.as_ref());
}

/// Log at info level.
pub fn info(message: impl AsRef<str>) {
    emit(LogLevel::Info, message.as_ref());
}

/// Log at warn level.
pub fn warn(message: impl AsRef<str>) {
    emit(LogLevel::Warn, message.as_ref());
}

/// Log at error level.
pub fn error(message: impl AsRef<str>) {
    emit(LogLevel::Error, message.as_ref());
}
