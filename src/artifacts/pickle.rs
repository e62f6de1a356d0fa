//! Pickles and NumPy object arrays recognised by their structure, not their first bytes.
//!
//! A pickle is a stream of opcodes, each with an argument of a known shape, ending at `STOP`.
//! [`is_pickle`] walks that stream through a file's first bytes. A stream that begins with a
//! `PROTO` (protocols 0 to 5) and stays valid is a pickle. Without `PROTO` (the text protocols)
//! it must also name code (`GLOBAL`, `STACK_GLOBAL`, `INST`, `EXT`: a call's `REDUCE`, `OBJ` or
//! `NEWOBJ` needs one first) or start a container, with every line argument of the shape
//! Python's unpickler takes: a word list such as labels, or a `requirements.txt`, does not pass.
//! [`npy_holds_objects`] reads a NumPy header whole: any `descr` but a plain number, string or
//! date type is taken for objects.

/// What an opcode's argument is.
#[derive(Clone, Copy)]
enum Arg {
    None,
    /// A fixed number of bytes.
    Fixed(usize),
    /// A length of this many bytes (little-endian), then that many bytes.
    Counted(usize),
    /// A line, of the given shape.
    Line(LineKind),
    /// Two lines, each a dotted name (`GLOBAL`, `INST`).
    TwoNames,
}

#[derive(Clone, Copy)]
enum LineKind {
    /// An integer (`INT`, `LONG`, `GET`, `PUT`; `INT` also takes `00`/`01`).
    Integer,
    /// A float (`FLOAT`).
    Float,
    /// A quoted string (`STRING`).
    Quoted,
    /// Anything (`UNICODE`, `PERSID`).
    Any,
}

/// The argument of `opcode`, and whether it names code (`GLOBAL`, `STACK_GLOBAL`, `INST`,
/// `EXT`: what a call needs first); `None` for a byte that is not an opcode.
fn opcode(byte: u8) -> Option<(Arg, bool)> {
    use Arg::*;
    use LineKind::*;
    let arg = match byte {
        b'(' | b')' | b'.' | b'0' | b'1' | b'2' | b'N' | b']' | b'}' | b'a' | b'b' | b'd'
        | b'e' | b'l' | b's' | b't' | b'u' | b'Q' => None,
        0x85..=0x89 | 0x8f | 0x90 | 0x91 | 0x94 | 0x97 | 0x98 => None,
        // Calls: only with a callable that a naming opcode put on the stack.
        b'R' | b'o' | 0x81 | 0x92 => None,
        0x93 => return Some((None, true)),
        b'c' | b'i' => return Some((TwoNames, true)),
        0x82 => return Some((Fixed(1), true)),
        0x83 => return Some((Fixed(2), true)),
        0x84 => return Some((Fixed(4), true)),
        b'I' | b'L' | b'g' | b'p' => Line(Integer),
        b'F' => Line(Float),
        b'S' => Line(Quoted),
        b'V' | b'P' => Line(Any),
        b'K' | b'h' | b'q' | 0x80 => Fixed(1),
        b'M' => Fixed(2),
        b'J' | b'j' | b'r' => Fixed(4),
        b'G' | 0x95 => Fixed(8),
        b'U' | b'C' | 0x8a | 0x8c => Counted(1),
        b'T' | b'X' | b'B' | 0x8b => Counted(4),
        0x8d | 0x8e | 0x96 => Counted(8),
        _ => return Option::None,
    };
    Some((arg, false))
}

/// How a walk through the first bytes of a file ended.
#[derive(Debug, PartialEq, Eq)]
enum Walk {
    /// At `STOP` (`stopped`), or at the end of the bytes with every opcode valid.
    Valid {
        code: bool,
        opcodes: usize,
        stopped: bool,
    },
    /// At a byte or argument no unpickler takes.
    Invalid,
}

fn walk(bytes: &[u8]) -> Walk {
    let (mut at, mut code, mut opcodes, mut stopped) = (0, false, 0, false);
    while let Some(&byte) = bytes.get(at) {
        let Some((arg, calls)) = opcode(byte) else {
            return Walk::Invalid;
        };
        opcodes += 1;
        code |= calls;
        at += 1;
        let rest = &bytes[at..];
        let used = match arg {
            Arg::None => Some(0),
            Arg::Fixed(n) => Some(n),
            Arg::Counted(width) => counted(rest, width),
            Arg::Line(kind) => line(rest, kind),
            Arg::TwoNames => two_names(rest),
        };
        match used {
            // Past the end of what was read: valid so far.
            Some(n) if n > rest.len() => break,
            Some(n) => at += n,
            Option::None => return Walk::Invalid,
        }
        if byte == b'.' {
            stopped = true;
            break;
        }
    }
    Walk::Valid {
        code,
        opcodes,
        stopped,
    }
}

/// The bytes a counted argument takes (its length field and its bytes), `usize::MAX` when its
/// length field itself runs past the end.
fn counted(rest: &[u8], width: usize) -> Option<usize> {
    let Some(field) = rest.get(..width) else {
        return Some(usize::MAX);
    };
    let mut length = 0u64;
    for (i, &b) in field.iter().enumerate() {
        length |= u64::from(b) << (8 * i);
    }
    Some(width.saturating_add(usize::try_from(length).unwrap_or(usize::MAX)))
}

/// The bytes a line argument takes (with its newline), when it has the shape `kind` needs;
/// `usize::MAX` for a line cut by the end of what was read.
fn line(rest: &[u8], kind: LineKind) -> Option<usize> {
    let Some(end) = rest.iter().position(|&b| b == b'\n') else {
        return Some(usize::MAX);
    };
    let text = &rest[..end];
    let fits = match kind {
        LineKind::Integer => {
            let digits = text.strip_suffix(b"L").unwrap_or(text);
            let digits = digits.strip_prefix(b"-").unwrap_or(digits);
            !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        }
        LineKind::Float => std::str::from_utf8(text).is_ok_and(|t| t.parse::<f64>().is_ok()),
        LineKind::Quoted => {
            text.len() >= 2 && (text[0] == b'\'' || text[0] == b'"') && text.last() == text.first()
        }
        LineKind::Any => true,
    };
    fits.then_some(end + 1)
}

/// The bytes two dotted-name lines take.
fn two_names(rest: &[u8]) -> Option<usize> {
    let mut at = 0;
    for _ in 0..2 {
        let Some(end) = rest[at..].iter().position(|&b| b == b'\n') else {
            return Some(usize::MAX);
        };
        if !is_dotted_name(&rest[at..at + end]) {
            return None;
        }
        at += end + 1;
    }
    Some(at)
}

fn is_dotted_name(word: &[u8]) -> bool {
    !word.is_empty()
        && !word[0].is_ascii_digit()
        && word
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// Whether `head` (a file's first bytes; `whole` when they are all of it) is the start of a
/// pickle. A protocol 0/1 stream must reach `STOP` in a file read whole.
pub fn is_pickle(head: &[u8], whole: bool) -> bool {
    let Walk::Valid {
        code,
        opcodes,
        stopped,
    } = walk(head)
    else {
        return false;
    };
    let protocol = head.first() == Some(&0x80) && head.get(1).is_some_and(|&p| p <= 5);
    let container = [&b"(dp"[..], b"(lp", b"(tp", b"]q", b"}q", b"(c", b"(i"]
        .iter()
        .any(|start| head.starts_with(start));
    // A protocol header and one more opcode, or a protocol 0/1 stream that reaches code or
    // opens a container (a lone `(` or `N` in a text file is not taken for one).
    // A code-calling stream in a file read whole must reach `STOP` (`cat\ndog\nbird\n` walks
    // as GLOBAL, BUILD, INST and is cut); a container's first opcodes are a pickle's alone.
    let ends = stopped || !whole;
    (protocol && opcodes >= 2) || (ends && code && opcodes >= 2) || (container && opcodes >= 3)
}

/// The type characters of the NumPy dtypes that hold no Python objects: booleans, integers,
/// floats, complex numbers, bytes and strings, raw bytes, dates and times.
const PLAIN_TYPES: &[u8] = b"?biufcSUVMma";

/// Whether a NumPy file's header (the bytes after its `\x93NUMPY` magic) describes anything
/// but a plain array: a `descr` of Python objects (`O`, however quoted or placed), a structured
/// dtype (a list, which may hold objects), or a header that cannot be read.
pub fn npy_holds_objects(after_magic: &[u8]) -> bool {
    let Some(&major) = after_magic.first() else {
        return true;
    };
    let (length_width, start): (usize, usize) = match major {
        1 => (2, 4),
        2 | 3 => (4, 6),
        _ => return true,
    };
    let Some(field) = after_magic.get(2..2 + length_width) else {
        return true;
    };
    let length = field
        .iter()
        .enumerate()
        .fold(0usize, |total, (i, &b)| total | (usize::from(b) << (8 * i)));
    let Some(header) = after_magic.get(start..start.saturating_add(length)) else {
        return true;
    };
    let text = String::from_utf8_lossy(header);
    let descr_values: Vec<&str> = ["'descr'", "\"descr\""]
        .iter()
        .flat_map(|key| text.match_indices(key).map(|(i, k)| &text[i + k.len()..]))
        .collect();
    let [value] = descr_values.as_slice() else {
        // None, or several (the last would win): not a header this check understands.
        return true;
    };
    let value = value.trim_start();
    let Some(value) = value.strip_prefix(':') else {
        return true;
    };
    let value = value.trim_start();
    let Some(quote) = value.chars().next().filter(|c| *c == '\'' || *c == '"') else {
        // A list or a tuple: a structured dtype.
        return true;
    };
    let Some(end) = value[1..].find(quote) else {
        return true;
    };
    let dtype = value[1..1 + end].trim_start_matches(['<', '>', '|', '=']);
    !dtype
        .bytes()
        .next()
        .is_some_and(|t| PLAIN_TYPES.contains(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str) -> Vec<u8> {
        let mut bytes = vec![1, 0];
        bytes.extend(u16::try_from(header.len()).unwrap().to_le_bytes());
        bytes.extend(header.as_bytes());
        bytes
    }

    #[test]
    fn pickles_of_every_protocol_and_shape_are_found() {
        for pickle in [
            &b"\x80\x00cos\nsystem\n(S'id'\ntR."[..],
            b"\x80\x00N.",
            b"\x80\x01}q\x00.",
            b"\x80\x04\x95",
            b"\x80\x02cposix\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.",
            b"cos\nsystem\nS'touch /tmp/x'\n\x85R.",
            b"cos\nsystem\n(S'touch /tmp/x'\ntR.",
            b"(ios\nsystem\nS'id'\no.",
            b"(dp0\nS'a'\np1\nI1\ns.",
            b"\x80\x05\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94.",
        ] {
            assert!(is_pickle(pickle, true), "{pickle:?}");
        }
    }

    #[test]
    fn text_and_weights_are_not_taken_for_pickles() {
        for other in [
            &b"cat\ndog\nbird\n"[..],
            b"cat\ndog\n",
            b"coffee\nespresso\nlatte\nmocha\n",
            b"label,score\n",
            b"N",
            b"(",
            b"\x80\x07\x00\x00",
            b"\x00\x00\x80\x3f\x00\x00\x00\x40",
            b"{\"a\": 1}",
            b"version: 1\n",
            b"\x08\x07\x12\x04onnx",
            b"torch==2.5\n",
            b"tokenizers>=0.19\nnumpy\n",
            b"2.0\n",
        ] {
            assert!(!is_pickle(other, true), "{other:?}");
        }
    }

    #[test]
    fn numpy_headers_are_read_whole() {
        for objects in [
            "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': 'O', 'fortran_order': False, 'shape': (2,), }",
            "{\"descr\": \"|O\", 'fortran_order': False, 'shape': (2,), }",
            "{'fortran_order': False, 'shape': (2,), 'descr':'<O8', }",
            "{'descr': [('a', '<f4'), ('b', '|O')], 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<f4', 'descr': '|O', 'shape': (2,), }",
            "{'shape': (2,), }",
        ] {
            assert!(npy_holds_objects(&npy(objects)), "{objects}");
        }
        let padded = format!(
            "{{'fortran_order': False, 'shape': (2,), {} 'descr': '|O'}}",
            " ".repeat(600)
        );
        assert!(npy_holds_objects(&npy(&padded)));
        for plain in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
            "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<U10', 'fortran_order': False, 'shape': (2,), }",
        ] {
            assert!(!npy_holds_objects(&npy(plain)), "{plain}");
        }
    }
}
