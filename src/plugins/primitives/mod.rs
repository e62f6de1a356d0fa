//! The host primitives: image pre-processing and tokenization trident runs natively on a guest's
//! behalf (the `images` and `text` interfaces), in any guest language, off the serving threads
//! and within the call's deadline. Pure work over bytes and settings: the sandbox's store offers
//! them to guests (`runtime::interfaces`); nothing here knows a store or a plugin.
//!
//! - [`pool`]: where they run (threads of their own, permits per engine, the call's deadline);
//! - [`images`]: `images.to-tensor`, with the image-tensor plugin's code (`trident-imaging`);
//! - [`text`]: `text.tokenize` and `text.detokenize`, with the text plugins' code
//!   (`trident-text`), and the parsed tokenizers each plugin keeps.

pub mod images;
pub mod pool;
pub mod text;
