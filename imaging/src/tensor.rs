//! Resized pixels as tensor elements: channel order, layout, element type, scale and
//! normalization.

use crate::settings::{Channels, Datatype, Layout, Preprocess};

/// Bytes one image takes in the tensor.
pub fn bytes_per_image(preprocess: &Preprocess) -> usize {
    let (w, h) = preprocess.size;
    let element = match preprocess.datatype {
        Datatype::Fp32 => 4,
        Datatype::Fp16 => 2,
        Datatype::Uint8 => 1,
    };
    w as usize * h as usize * preprocess.channels.count() * element
}

/// `f32` to IEEE 754 half precision, rounding to nearest even (infinities and NaN kept).
pub fn f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    if exponent == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let half_exponent = exponent - 127 + 15;
    if half_exponent >= 0x1f {
        return sign | 0x7c00;
    }
    if half_exponent <= 0 {
        if half_exponent < -10 {
            return sign;
        }
        let mantissa = mantissa | 0x80_0000;
        let shift = (14 - half_exponent) as u32;
        let half = mantissa >> shift;
        let rest = mantissa & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let rounded = half + u32::from(rest > halfway || (rest == halfway && half & 1 == 1));
        return sign | rounded as u16;
    }
    let half = ((half_exponent as u32) << 10) | (mantissa >> 13);
    let rest = mantissa & 0x1fff;
    let rounded = half + u32::from(rest > 0x1000 || (rest == 0x1000 && half & 1 == 1));
    sign | rounded as u16
}

/// Fills `dest` with the elements `element(pixel, channel)` of `pixels` (RGB triples), `N`
/// bytes each, in `layout`'s order.
fn fill<const N: usize>(
    dest: &mut [u8],
    (layout, channels): (Layout, usize),
    pixels: &[[f32; 3]],
    element: impl Fn(&[f32; 3], usize) -> [u8; N],
) {
    match layout {
        Layout::Nchw => {
            for (channel, plane) in dest.chunks_exact_mut(pixels.len() * N).enumerate() {
                for (out, pixel) in plane.as_chunks_mut::<N>().0.iter_mut().zip(pixels) {
                    *out = element(pixel, channel);
                }
            }
        }
        Layout::Nhwc => {
            for (group, pixel) in dest.chunks_exact_mut(channels * N).zip(pixels) {
                for (channel, out) in group.as_chunks_mut::<N>().0.iter_mut().enumerate() {
                    *out = element(pixel, channel);
                }
            }
        }
    }
}

/// Each pixel of `image` made its luminance in all three channels, as Pillow's `convert("L")`
/// computes it (ITU-R 601-2 weights in 16-bit fixed point, rounded).
pub fn to_luminance(image: &mut image::RgbImage) {
    for pixel in image.pixels_mut() {
        let [r, g, b] = pixel.0.map(u32::from);
        let luminance = ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16) as u8;
        pixel.0 = [luminance; 3];
    }
}

/// Appends the tensor elements of one image (`pixels`: height × width × RGB, 0..255) to `out`.
#[inline(never)]
pub fn write(pixels: &[f32], preprocess: &Preprocess, out: &mut Vec<u8>) {
    let count = preprocess.size.0 as usize * preprocess.size.1 as usize;
    let pixels = &pixels.as_chunks::<3>().0[..count];
    // The input channel each tensor channel takes.
    let source = match preprocess.channels {
        Channels::Bgr => [2, 1, 0],
        Channels::Rgb | Channels::Gray => [0, 1, 2],
    };
    // (raw * scale - mean) / std, as one multiply and one subtraction per element.
    let (scale, mean, std) = (preprocess.scale, preprocess.mean, preprocess.std);
    let factor = std.map(|std| scale / std);
    let offset = [0, 1, 2].map(|c| mean[c] / std[c]);
    // Gray images were made luminance before the resize ([`to_luminance`]): every channel
    // holds it.
    let raw = |pixel: &[f32; 3], channel: usize| pixel[source[channel]];
    let value =
        |pixel: &[f32; 3], channel: usize| raw(pixel, channel) * factor[channel] - offset[channel];
    let start = out.len();
    out.resize(start + bytes_per_image(preprocess), 0);
    let (dest, layout) = (
        &mut out[start..],
        (preprocess.layout, preprocess.channels.count()),
    );
    match preprocess.datatype {
        Datatype::Fp32 => fill(dest, layout, pixels, |p, c| value(p, c).to_le_bytes()),
        Datatype::Fp16 => fill(dest, layout, pixels, |p, c| {
            f16_bits(value(p, c)).to_le_bytes()
        }),
        Datatype::Uint8 => fill(dest, layout, pixels, |p, c| {
            // Rounded half away from zero, as `round` (a libm call on the baseline x86-64)
            // would: clamped first, that is adding a half and truncating.
            [(raw(p, c).clamp(0.0, 255.0) + 0.5) as u8]
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_rounds_to_nearest_even() {
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(-2.0), 0xc000);
        assert_eq!(f16_bits(65504.0), 0x7bff);
        assert_eq!(f16_bits(1e6), 0x7c00);
        assert_eq!(f16_bits(5.960_464_5e-8), 0x0001);
        assert_eq!(f16_bits(0.1), 0x2e66);
        assert_eq!(f16_bits(f32::NAN) & 0x7c00, 0x7c00);
    }

    /// One channel of luminance, rounded as Pillow's `convert("L")` rounds it, normalized by
    /// the first mean and std.
    #[test]
    fn gray_is_one_channel_of_pillows_luminance() {
        let mut image =
            image::RgbImage::from_raw(3, 1, vec![255, 0, 0, 0, 255, 0, 10, 20, 30]).unwrap();
        to_luminance(&mut image);
        let pixels: Vec<f32> = image.as_raw().iter().map(|v| f32::from(*v)).collect();
        let mut p = Preprocess {
            size: (3, 1),
            channels: Channels::Gray,
            datatype: Datatype::Uint8,
            ..Preprocess::default()
        };
        let mut out = Vec::new();
        write(&pixels, &p, &mut out);
        // Pillow: (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16.
        assert_eq!(out, [76, 150, 18]);
        p.datatype = Datatype::Fp32;
        p.layout = Layout::Nhwc;
        (p.mean, p.std, p.scale) = ([0.5; 3], [0.25; 3], 1.0 / 255.0);
        out.clear();
        write(&pixels, &p, &mut out);
        let first = f32::from_le_bytes(out[..4].try_into().unwrap());
        assert!(
            (first - (76.0 / 255.0 - 0.5) / 0.25).abs() < 1e-5,
            "{first}"
        );
        assert_eq!(out.len(), 3 * 4);
    }

    /// A uint8 tensor rounds as `f32::round` does (half away from zero), clamped to 0..255.
    #[test]
    fn uint8_values_round_half_away_and_clamp() {
        let pixels = [-3.0, 0.49, 0.5, 1.5, 254.49, 254.5, 300.0, 127.5, 2.5];
        let p = Preprocess {
            size: (3, 1),
            layout: Layout::Nhwc,
            datatype: Datatype::Uint8,
            ..Preprocess::default()
        };
        let mut out = Vec::new();
        write(&pixels, &p, &mut out);
        let want: Vec<u8> = pixels
            .iter()
            .map(|v: &f32| v.round().clamp(0.0, 255.0) as u8)
            .collect();
        assert_eq!(want, [0, 0, 1, 2, 254, 255, 255, 128, 3]);
        assert_eq!(out, want);
    }

    #[test]
    fn layouts_channels_and_normalization() {
        // Two pixels: (255, 0, 0) and (0, 255, 0).
        let pixels = [255.0, 0.0, 0.0, 0.0, 255.0, 0.0];
        let mut p = Preprocess {
            size: (2, 1),
            mean: [0.0; 3],
            std: [1.0; 3],
            ..Preprocess::default()
        };
        let floats = |bytes: &[u8]| -> Vec<f32> {
            bytes
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let mut out = Vec::new();
        write(&pixels, &p, &mut out);
        assert_eq!(floats(&out), [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        p.layout = Layout::Nhwc;
        p.channels = Channels::Bgr;
        out.clear();
        write(&pixels, &p, &mut out);
        assert_eq!(floats(&out), [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
        p.datatype = Datatype::Uint8;
        out.clear();
        write(&pixels, &p, &mut out);
        assert_eq!(out, [0, 0, 255, 0, 255, 0]);
        p.datatype = Datatype::Fp32;
        p.channels = Channels::Rgb;
        p.mean = [0.5; 3];
        p.std = [0.5; 3];
        out.clear();
        write(&pixels, &p, &mut out);
        assert_eq!(floats(&out), [1.0, -1.0, -1.0, -1.0, 1.0, -1.0]);
    }
}
