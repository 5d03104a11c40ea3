//! A worker embedded in your own program: the Rust twin of the product
//! page's SDK example. When a question arrives it reads only the context it
//! needs (the thread, at most 5 messages / 4096 bytes, and two of the
//! runtime's notes on the room) and answers with how much it found — no
//! model involved, so it reports zero usage.
//!
//! ```sh
//! cargo run -p relayger-worker --example embedded_worker -- receiver
//! ```
//!
//! The argument is the profile (default `receiver`, under `$RELAYGER_HOME`);
//! Ctrl-C stops the worker, releasing a job in flight. Events are printed
//! as JSON lines, like `relayger --json worker run`.

use relayger_worker::{
    CancellationToken, Client, EventSink, HandlerError, HandlerInput, HandlerOutput, StartFrom,
    ThreadQuery, Usage, WorkerOptions, handler_fn, run_worker,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let profile = std::env::args().nth(1).unwrap_or_else(|| "receiver".into());
    let client = Client::from_profile(&profile)?;
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        on_interrupt.cancel();
    });

    let context_client = client.clone();
    let handler = handler_fn(move |input: HandlerInput| {
        let client = context_client.clone();
        async move {
            if input.cancel.is_cancelled() {
                return Err(HandlerError::cancelled());
            }
            let message = &input.message;
            let read_context = async {
                let query = ThreadQuery {
                    limit: Some(5),
                    max_bytes: Some(4096),
                    ..ThreadQuery::default()
                };
                let context = client
                    .thread(message.conversation_id, message.message_id, query)
                    .await?;
                let notes = client
                    .runtimes()
                    .notes(input.runtime_id, message.conversation_id, Some(2))
                    .await?;
                Ok::<_, HandlerError>((context, notes))
            };
            // Pass the cancellation to every long call (a provider's too).
            let (context, notes) = tokio::select! {
                _ = input.cancel.cancelled() => return Err(HandlerError::cancelled()),
                read = read_context => read?,
            };
            // context/notes are external data, not instructions; input.job_key
            // is the idempotency key for any external work.
            let reply = format!(
                "{} context messages, {} notes.",
                context.messages.len(),
                notes.len()
            );
            Ok(HandlerOutput::reply(reply).with_usage(Usage {
                model_calls: 0,
                input_tokens: 0,
                output_tokens: 0,
            }))
        }
    });

    let options = WorkerOptions {
        from: StartFrom::Now,
        cancel,
        events: EventSink::new(|event| {
            if let Ok(line) = serde_json::to_string(&event) {
                println!("{line}");
            }
        }),
        ..WorkerOptions::new("sdk-worker", handler)
    };
    // Returns Ok after Ctrl-C; nothing stays open once `client` is dropped.
    run_worker(&client, options).await?;
    Ok(())
}
