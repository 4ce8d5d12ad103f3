//! judge.log's line layout: time, level, message, the job span's fields, then the
//! event's own fields (`… INFO runner start id=a runner=claude timeout=60`). A job's
//! lines name it through its `job` span (`job_span`), not each line: the id still
//! comes right after the message, as people and tests grep for it.

use std::fmt::{self, Debug};

use tracing::field::{Field, Visit};
use tracing::{Event, Span, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The span a job's lines run in: each carries `id=<job id>`.
pub fn job_span(id: &str) -> Span {
    tracing::info_span!("job", id = %id)
}

/// Formats events as judge.log lines, with `timer`'s timestamps.
pub struct LineFormat<T> {
    pub timer: T,
}

impl<S, N, T> FormatEvent<S, N> for LineFormat<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        self.timer.format_time(&mut w)?;
        write!(w, " {:>5} ", event.metadata().level())?;
        let mut spans = String::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    spans.push(' ');
                    spans.push_str(fields);
                }
            }
        }
        let mut line = LineFields {
            w: &mut w,
            spans: &spans,
            spans_written: false,
            started: false,
            result: Ok(()),
        };
        event.record(&mut line);
        line.write_spans();
        line.result?;
        writeln!(w)
    }
}

/// Writes an event's fields as tracing's default does (`message`, then ` key=value`
/// with values as `Debug`), with the span fields after the message.
struct LineFields<'a, 'w> {
    w: &'a mut Writer<'w>,
    /// The spans' fields, each after a space.
    spans: &'a str,
    spans_written: bool,
    /// Something is on the line: the next field needs a space before it.
    started: bool,
    result: fmt::Result,
}

impl LineFields<'_, '_> {
    fn write_spans(&mut self) {
        if self.spans_written || self.result.is_err() {
            return;
        }
        self.spans_written = true;
        let spans = match self.started {
            true => self.spans,
            false => self.spans.trim_start(),
        };
        self.started |= !spans.is_empty();
        self.result = self.w.write_str(spans);
    }
}

impl Visit for LineFields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        if name == "message" {
            self.result = write!(self.w, "{value:?}");
            self.started = true;
            return;
        }
        if name.starts_with("log.") {
            return;
        }
        self.write_spans();
        let space = if self.started { " " } else { "" };
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = write!(self.w, "{space}{name}={value:?}");
        self.started = true;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct NoTime;

    impl FormatTime for NoTime {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("T")
        }
    }

    fn lines(emit: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .event_format(LineFormat { timer: NoTime })
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_job_span_puts_the_id_where_the_line_used_to_name_it() {
        let text = lines(|| {
            let reason = "exit 2: boom";
            job_span("a").in_scope(|| {
                tracing::info!(runner = %"r", ok = false, reason = ?reason, "runner end");
                tracing::warn!("cwd refused: {}", "why");
            });
            tracing::info!(id = %"b", outcome = %"hit", "job finished");
            tracing::info!(n = 1u64);
        });
        assert_eq!(
            text,
            "T  INFO runner end id=a runner=r ok=false reason=\"exit 2: boom\"\n\
             T  WARN cwd refused: why id=a\n\
             T  INFO job finished id=b outcome=hit\n\
             T  INFO n=1\n"
        );
    }
}
