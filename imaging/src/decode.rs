//! One encoded image decoded, within limits, to 8-bit RGB.
//!
//! The format is told by the first bytes: JPEG, PNG, WebP, BMP, GIF (its first frame, as Pillow's
//! `Image.open` gives it) or TIFF (its first page); anything else is a 415 naming what the
//! endpoint takes. The header is read first and an image of more than `max_pixels` pixels is
//! refused before any pixel is decoded, so a 60000×60000 header or a PNG whose zlib stream would
//! inflate a thousandfold costs the reading of a header. The decoder's own allocations are
//! capped too. The EXIF orientation is applied (a damaged EXIF block is ignored: the image is
//! served as stored). Grayscale, alpha, palette, CMYK and 16-bit images become 8-bit RGB (alpha
//! dropped, as Pillow's `convert("RGB")` does). A JPEG cut short is refused, though the decoder
//! would fill it with grey. A JPEG's work grows with its scans as well as its pixels (each scan
//! of a progressive JPEG passes over the whole image again): pixels × scans may be at most
//! [`SCAN_BUDGET`] times `max_pixels`, and a JPEG may have at most [`MAX_SCANS`] scans, counted
//! in its markers before any is decoded.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, RgbImage};

use crate::{Error, Limits};

/// The formats a body may be in, for errors.
pub const FORMATS: &str = "JPEG, PNG, WebP, BMP, GIF or TIFF";

/// What the first bytes of `bytes` say it is: a format this decodes, or the name of one it
/// does not.
fn sniff(bytes: &[u8]) -> Result<ImageFormat, Error> {
    let other = |what: &str| {
        Err(Error::Unsupported(format!(
            "the image is {what}; this endpoint takes {FORMATS}"
        )))
    };
    match bytes {
        [0xff, 0xd8, 0xff, ..] => Ok(ImageFormat::Jpeg),
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Ok(ImageFormat::Png),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Ok(ImageFormat::Gif),
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => Ok(ImageFormat::WebP),
        [b'B', b'M', ..] => Ok(ImageFormat::Bmp),
        [b'I', b'I', 42, 0, ..] | [b'M', b'M', 0, 42, ..] => Ok(ImageFormat::Tiff),
        [b'I', b'I', 43, 0, ..] | [b'M', b'M', 0, 43, ..] => other("a BigTIFF"),
        [0, 0, 0, _, b'f', b't', b'y', b'p', ..] => other("a HEIF or AVIF"),
        [] => Err(Error::BadRequest("the image is empty".into())),
        _ => Err(Error::Unsupported(format!(
            "the body is not an image of a format this endpoint takes ({FORMATS}; its first \
             bytes say none of them)"
        ))),
    }
}

fn name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "PNG",
        ImageFormat::WebP => "WebP",
        ImageFormat::Bmp => "BMP",
        ImageFormat::Gif => "GIF",
        ImageFormat::Tiff => "TIFF",
        _ => "JPEG",
    }
}

/// Whether a JPEG that has a scan ends its image: an end-of-image marker after its first scan.
/// The decoder fills what a truncated file lacks with grey and reports nothing; the marker
/// cannot occur inside a scan's data (a 0xFF byte there is stuffed), and an EXIF thumbnail's
/// own marker comes before the first scan. A JPEG without a scan is the decoder's to refuse.
fn jpeg_is_complete(bytes: &[u8]) -> bool {
    // memchr's searches: a byte at a time this was a few percent of serving a photo.
    match memchr::memmem::find(bytes, &[0xff, 0xda]) {
        // Searched from the end, where the marker is.
        Some(start) => memchr::memmem::rfind(&bytes[start..], &[0xff, 0xd9]).is_some(),
        None => true,
    }
}

/// How many images' worth of pixels at `max_pixels` one JPEG's scans may decode: a baseline
/// JPEG has one scan (three when its components are not interleaved), a progressive one from
/// libjpeg ten, mozjpeg's about as many; at a 12 MP ceiling an image of that size may
/// have 16 scans, a 1 MP image 192.
pub const SCAN_BUDGET: u64 = 16;

/// The most scans any JPEG may have, however small: each costs the decoder a pass of its own.
pub const MAX_SCANS: u64 = 256;

/// How many scans (start-of-scan segments) a JPEG has, walking its markers: segments are
/// skipped by their length (an EXIF thumbnail's own scan is inside one), entropy-coded data up
/// to the next marker that is not a restart. Linear in the bytes; a malformed stream ends the
/// count there (the decoder refuses it).
fn jpeg_scans(bytes: &[u8]) -> u64 {
    let mut at = 2;
    let mut scans = 0;
    while at + 1 < bytes.len() {
        if bytes[at] != 0xff {
            break;
        }
        let marker = bytes[at + 1];
        at += if marker == 0xff { 1 } else { 2 };
        match marker {
            0xff | 0x01 | 0xd0..=0xd7 => continue,
            0xd9 => break,
            _ => {}
        }
        let Some(length) = bytes.get(at..at + 2) else {
            break;
        };
        let length = usize::from(u16::from_be_bytes([length[0], length[1]]));
        if length < 2 {
            break;
        }
        at += length;
        if marker == 0xda {
            scans += 1;
            at = after_entropy_coded_data(bytes, at);
        }
    }
    scans
}

/// Where the entropy-coded data from `at` ends: the next 0xFF that starts a marker (neither a
/// stuffed 0xFF 0x00 nor a restart), else the last byte (or `at`, if it is past it); the 0xFF
/// bytes found by `memchr`.
fn after_entropy_coded_data(bytes: &[u8], mut at: usize) -> usize {
    while at + 1 < bytes.len() {
        let Some(next) = memchr::memchr(0xff, &bytes[at..]) else {
            return bytes.len() - 1;
        };
        at += next;
        match bytes.get(at + 1) {
            Some(&marker) if marker != 0 && !(0xd0..=0xd7).contains(&marker) => return at,
            Some(_) => at += 1,
            None => return at,
        }
    }
    at
}

/// Refuses a JPEG of `pixels` whose `scans` would take more decoding than [`SCAN_BUDGET`] and
/// [`MAX_SCANS`] allow.
fn check_scans(width: u32, height: u32, scans: u64, limits: &Limits) -> Result<(), Error> {
    let pixels = u64::from(width) * u64::from(height);
    let budget = limits.max_pixels.saturating_mul(SCAN_BUDGET);
    if scans > MAX_SCANS || pixels.saturating_mul(scans) > budget {
        let most = (budget / pixels.max(1)).clamp(1, MAX_SCANS);
        return Err(Error::BadRequest(format!(
            "the JPEG image is {width}x{height} in {scans} scans; decoding it would pass over \
             its pixels {scans} times, and this endpoint decodes an image of that size in at \
             most {most} scans (pixels x scans at most {SCAN_BUDGET} x max_pixels = {budget}, \
             and at most {MAX_SCANS} scans)"
        )));
    }
    Ok(())
}

/// A PNG's size as its header (`IHDR`, which must come first) states it.
fn png_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let header = bytes.get(8..24)?;
    if &header[4..8] != b"IHDR" {
        return None;
    }
    let number = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    Some((number(8), number(12)))
}

/// Refuses an image of `width` × `height` with no pixels or more than `limits` allow.
fn check_size(format: ImageFormat, width: u32, height: u32, limits: &Limits) -> Result<(), Error> {
    let pixels = u64::from(width) * u64::from(height);
    if pixels == 0 {
        return Err(Error::BadRequest(format!(
            "the {} image is {width}x{height}: it has no pixels",
            name(format)
        )));
    }
    if pixels > limits.max_pixels {
        return Err(Error::BadRequest(format!(
            "the {} image is {width}x{height} ({pixels} pixels); this endpoint takes images of \
             at most {} pixels (set by {})",
            name(format),
            limits.max_pixels,
            limits.max_pixels_set_by
        )));
    }
    Ok(())
}

/// What a decoder may allocate: the largest pixels it may hold (16-bit RGBA, or a 32-bit
/// float TIFF's RGB), and room for its tables; and images no larger than `limits` allow, which
/// a decoder checks before it allocates (a GIF's frame, a TIFF's strips).
fn decoder_limits(limits: &Limits) -> image::Limits {
    let mut decoder_limits = image::Limits::default();
    decoder_limits.max_alloc = Some(
        limits
            .max_pixels
            .saturating_mul(12)
            .saturating_add(16 << 20),
    );
    decoder_limits
}

/// `bytes`, one image of [`FORMATS`], as 8-bit RGB with its orientation applied.
#[inline(never)]
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<RgbImage, Error> {
    let format = sniff(bytes)?;
    // A PNG decoder reserves its image's memory as it opens: the size is checked first.
    if let Some((width, height)) = png_dimensions(bytes) {
        check_size(format, width, height, limits)?;
    }
    if format == ImageFormat::Jpeg && !jpeg_is_complete(bytes) {
        return Err(Error::BadRequest(
            "the JPEG image is truncated: it has no end-of-image marker after its scan".into(),
        ));
    }
    let broken = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => Error::BadRequest(format!(
            "the {} image needs more memory to decode than this endpoint allows",
            name(format)
        )),
        e => Error::BadRequest(format!("the {} image cannot be decoded: {e}", name(format))),
    };
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(decoder_limits(limits));
    let mut decoder = reader.into_decoder().map_err(broken)?;
    let (width, height) = decoder.dimensions();
    check_size(format, width, height, limits)?;
    if format == ImageFormat::Jpeg {
        check_scans(width, height, jpeg_scans(bytes), limits)?;
    }
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(broken)?;
    image.apply_orientation(orientation);
    Ok(match image {
        DynamicImage::ImageRgb8(rgb) => rgb,
        other => other.to_rgb8(),
    })
}

/// The width and height `bytes` (one image of [`FORMATS`]) has once its EXIF orientation is
/// applied, read from its header within `limits` (what [`decode`] would give, no pixel
/// decoded): what a response adapter needs to map a model's output back onto the photo.
pub fn dimensions(bytes: &[u8], limits: &Limits) -> Result<(u32, u32), Error> {
    use image::metadata::Orientation;
    let format = sniff(bytes)?;
    if let Some((width, height)) = png_dimensions(bytes) {
        check_size(format, width, height, limits)?;
    }
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(decoder_limits(limits));
    let mut decoder = reader.into_decoder().map_err(|e| {
        Error::BadRequest(format!("the {} image cannot be decoded: {e}", name(format)))
    })?;
    let (width, height) = decoder.dimensions();
    check_size(format, width, height, limits)?;
    Ok(match decoder.orientation() {
        Ok(
            Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH,
        ) => (height, width),
        _ => (width, height),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32, color: image::ColorType) -> Vec<u8> {
        let image = DynamicImage::new(width, height, color);
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn every_png_colour_type_becomes_rgb() {
        for color in [
            image::ColorType::L8,
            image::ColorType::La8,
            image::ColorType::Rgba8,
            image::ColorType::Rgb16,
            image::ColorType::Rgba16,
        ] {
            let rgb = decode(&png(3, 2, color), &Limits::default()).unwrap();
            assert_eq!(rgb.dimensions(), (3, 2), "{color:?}");
        }
    }

    /// A JPEG's markers as a decoder meets them: SOI, an APP1 segment holding a thumbnail's
    /// own scan, then `scans` scans whose data has stuffed bytes and restarts, then EOI.
    fn jpeg_of_scans(scans: usize) -> Vec<u8> {
        let mut bytes = vec![0xff, 0xd8];
        let thumbnail = [0xff, 0xda, 0x00, 0x02, 0x01, 0xff, 0xd9];
        bytes.extend([0xff, 0xe1, 0x00, (thumbnail.len() + 2) as u8]);
        bytes.extend(thumbnail);
        for _ in 0..scans {
            bytes.extend([0xff, 0xc4, 0x00, 0x03, 0x00]);
            bytes.extend([0xff, 0xda, 0x00, 0x04, 0x01, 0x02]);
            bytes.extend([0x12, 0xff, 0x00, 0x34, 0xff, 0xd3, 0x56, 0xff, 0xff]);
        }
        bytes.extend([0xff, 0xd9]);
        bytes
    }

    /// The marker scans with `memchr` answer as a byte at a time did, on byte strings made of
    /// markers, stuffing, restarts and data, and on every prefix of a JPEG of many scans.
    #[test]
    fn marker_scans_answer_as_a_byte_at_a_time() {
        fn complete_slowly(bytes: &[u8]) -> bool {
            match bytes.windows(2).position(|pair| pair == [0xff, 0xda]) {
                Some(start) => bytes[start..].windows(2).any(|pair| pair == [0xff, 0xd9]),
                None => true,
            }
        }
        fn after_slowly(bytes: &[u8], mut at: usize) -> usize {
            while at + 1 < bytes.len()
                && !(bytes[at] == 0xff
                    && bytes[at + 1] != 0
                    && !(0xd0..=0xd7).contains(&bytes[at + 1]))
            {
                at += 1;
            }
            at
        }
        let alphabet = [0xff, 0xff, 0x00, 0xd0, 0xd7, 0xd8, 0xd9, 0xda, 0x12, 0x01];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut cases: Vec<Vec<u8>> = (0..4000)
            .map(|_| {
                let len = (next() % 24) as usize;
                (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect();
        let whole = jpeg_of_scans(7);
        cases.extend((0..=whole.len()).map(|end| whole[..end].to_vec()));
        for bytes in &cases {
            assert_eq!(
                jpeg_is_complete(bytes),
                complete_slowly(bytes),
                "{bytes:x?}"
            );
            for at in 0..=bytes.len() {
                assert_eq!(
                    after_entropy_coded_data(bytes, at),
                    after_slowly(bytes, at),
                    "{bytes:x?} from {at}"
                );
            }
        }
    }

    #[test]
    fn scans_are_counted_in_the_markers_and_held_to_the_budget() {
        for scans in [0, 1, 10, 99] {
            assert_eq!(jpeg_scans(&jpeg_of_scans(scans)), scans as u64);
        }
        // Cut short anywhere: the count stops there, never past the bytes.
        let whole = jpeg_of_scans(5);
        for end in 0..whole.len() {
            assert!(jpeg_scans(&whole[..end]) <= 5);
        }
        let limits = Limits {
            max_pixels: 12_000_000,
            ..Limits::default()
        };
        assert!(check_scans(4000, 3000, 16, &limits).is_ok());
        let error = check_scans(4000, 3000, 99, &limits).unwrap_err();
        assert!(
            error.to_string().contains("4000x3000 in 99 scans")
                && error.to_string().contains("at most 16 scans"),
            "{error}"
        );
        assert!(check_scans(1000, 1000, 192, &limits).is_ok());
        let error = check_scans(10, 10, 257, &limits).unwrap_err();
        assert!(error.to_string().contains("at most 256 scans"), "{error}");
    }

    #[test]
    fn the_pixel_limit_is_checked_in_the_header() {
        let limits = Limits {
            max_pixels: 5,
            ..Limits::default()
        };
        let error = decode(&png(3, 2, image::ColorType::Rgb8), &limits).unwrap_err();
        assert!(error.to_string().contains("3x2 (6 pixels)"), "{error}");
    }

    #[test]
    fn webp_bmp_gif_and_tiff_decode_to_their_pixels() {
        let image = RgbImage::from_fn(7, 5, |x, y| {
            image::Rgb([(x * 30) as u8, (y * 50) as u8, ((x + y) * 10) as u8])
        });
        for format in [
            ImageFormat::WebP,
            ImageFormat::Bmp,
            ImageFormat::Tiff,
            ImageFormat::Png,
        ] {
            let mut bytes = Cursor::new(Vec::new());
            DynamicImage::ImageRgb8(image.clone())
                .write_to(&mut bytes, format)
                .unwrap();
            let bytes = bytes.into_inner();
            let decoded = decode(&bytes, &Limits::default()).unwrap();
            assert_eq!(decoded, image, "{format:?}");
            assert_eq!(dimensions(&bytes, &Limits::default()).unwrap(), (7, 5));
            let small = Limits {
                max_pixels: 34,
                ..Limits::default()
            };
            let error = decode(&bytes, &small).unwrap_err();
            assert!(
                error.to_string().contains("7x5 (35 pixels)"),
                "{format:?}: {error}"
            );
        }
        // A GIF (a palette of its colours: a two-colour image keeps them) is its first frame.
        let two = RgbImage::from_fn(4, 4, |x, _| match x % 2 {
            0 => image::Rgb([255, 0, 0]),
            _ => image::Rgb([0, 0, 255]),
        });
        let mut gif = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(two.clone())
            .write_to(&mut gif, ImageFormat::Gif)
            .unwrap();
        assert_eq!(decode(gif.get_ref(), &Limits::default()).unwrap(), two);
    }

    #[test]
    fn other_formats_and_garbage_are_named() {
        for (bytes, says) in [
            (&b"II+\0...."[..], "a BigTIFF"),
            (b"\0\0\0\x18ftypheic", "a HEIF"),
            (b"hello", "none of them"),
            (b"", "empty"),
        ] {
            let error = decode(bytes, &Limits::default()).unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
        let mut truncated = png(64, 64, image::ColorType::Rgb8);
        truncated.truncate(truncated.len() / 2);
        let error = decode(&truncated, &Limits::default()).unwrap_err();
        assert!(matches!(error, Error::BadRequest(_)), "{error}");
        let noisy = RgbImage::from_fn(64, 64, |x, y| {
            image::Rgb([((x * 9) ^ (y * 5)) as u8, (y * 7) as u8, (x * 3) as u8])
        });
        let mut jpeg = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(noisy)
            .write_to(&mut jpeg, ImageFormat::Jpeg)
            .unwrap();
        let mut jpeg = jpeg.into_inner();
        assert!(decode(&jpeg, &Limits::default()).is_ok());
        jpeg.truncate(jpeg.len() / 2);
        let error = decode(&jpeg, &Limits::default()).unwrap_err();
        assert!(error.to_string().contains("JPEG"), "{error}");
    }
}
