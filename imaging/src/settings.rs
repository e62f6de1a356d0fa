//! What a plugin's configuration says about its images: how they become a tensor
//! ([`Preprocess`]) and how large they may be ([`Limits`]). Every key is optional; the defaults
//! are torchvision's ImageNet preprocessing (shorter side to 256, centre 224×224, RGB, NCHW,
//! FP32, scaled to 0..1, ImageNet mean and std) and limits that fit a 128 MiB plugin.

/// How the channels are laid out in the tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[channels, height, width]` (PyTorch, ONNX).
    Nchw,
    /// `[height, width, channels]` (TensorFlow).
    Nhwc,
}

/// Which channels the tensor has, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// Red, green, blue.
    Rgb,
    /// Blue, green, red (OpenCV, Caffe).
    Bgr,
    /// One channel of luminance, as Pillow's `convert("L")` weighs it (`channels = "L"`).
    Gray,
}

impl Channels {
    /// How many channels the tensor has.
    pub fn count(self) -> usize {
        match self {
            Channels::Rgb | Channels::Bgr => 3,
            Channels::Gray => 1,
        }
    }
}

/// The tensor's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datatype {
    /// 32-bit floats, scaled and normalized.
    Fp32,
    /// 16-bit floats, scaled and normalized.
    Fp16,
    /// The 8-bit pixel values, neither scaled nor normalized.
    Uint8,
}

/// How an image is brought to the tensor's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// The shorter side to this length (keeping the aspect ratio), then the centre cropped to
    /// the size: torchvision's `Resize(n)` and `CenterCrop(size)`.
    Shorter(u32),
    /// Straight to `to` (width, height), whatever the aspect ratio, then the centre cropped to
    /// the size where `to` is larger (`resize_to`; Hugging Face's DeiT and BEiT processors:
    /// 256×256, then the centre 224×224). `to` is the size when no `resize_to` is given.
    Stretch {
        /// The size the image is stretched to before the crop.
        to: (u32, u32),
    },
    /// The whole image scaled to fit the size, its aspect ratio kept, centred, and the margins
    /// filled with a gray level (`pad_value`): a YOLO detector's letterbox, with ultralytics'
    /// rounding (`resize = "letterbox"`). On a square size, the pad-to-square of vision-language
    /// models.
    Letterbox {
        /// The 8-bit level the margins are filled with, before scaling and normalizing.
        pad: u8,
        /// Whether an image smaller than the size is scaled up (`letterbox_up`, default
        /// true), or kept at its size in the middle.
        up: bool,
    },
    /// The whole image, its aspect ratio kept, each side a multiple of a number: a detector's
    /// input, whose size follows the image's (PaddleOCR's `DetResizeForTest`, as RapidOCR
    /// runs it). The tensor's size is the image's own, so a request holds one image.
    Limit(SideLimit),
}

/// How `resize = "limit"` sizes an image of `w`×`h`, in RapidOCR's steps: first, where the
/// longer side is over `max_side`, the image is brought down to it (each side then rounded to
/// the `multiple`); then scaled by `limit_side / shorter` where the shorter side is under
/// `limit_side` (`limit_type = "min"`), or by `limit_side / longer` where the longer side is
/// over it (`"max"`); each side is then truncated and rounded to the nearest `multiple` (half to
/// even, as Python's `round`), and at least one `multiple`. See [`SideLimit::size`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideLimit {
    /// The side the limit holds the image to.
    pub side: u32,
    /// `true`: the shorter side is brought up to `side` (`min`); `false`: the longer side is
    /// brought down to it (`max`).
    pub at_least: bool,
    /// What each side of the tensor is a multiple of.
    pub multiple: u32,
    /// The longest side an image keeps before the limit is applied.
    pub max_side: u32,
}

impl SideLimit {
    /// The tensor's `(width, height)` for an image of `width`×`height` (RapidOCR's
    /// `reduce_max_side`, then `DetPreProcess.resize`, in their float arithmetic).
    pub fn size(&self, width: u32, height: u32) -> (u32, u32) {
        let multiple = f64::from(self.multiple);
        let scaled = |(w, h): (u32, u32), ratio: f64| -> (u32, u32) {
            let side = |s: u32| {
                let truncated = (f64::from(s) * ratio).trunc();
                let rounded = (truncated / multiple).round_ties_even() * multiple;
                // At least one multiple, at most what a tensor side may be and more (the
                // caller refuses a side over MAX_SIDE by name).
                rounded.clamp(multiple, f64::from(u32::MAX / 2)) as u32
            };
            (side(w), side(h))
        };
        let mut size = (width, height);
        let longer = width.max(height);
        if longer > self.max_side {
            size = scaled(size, f64::from(self.max_side) / f64::from(longer));
        }
        let (w, h) = size;
        let ratio = if self.at_least {
            match w.min(h) {
                shorter if shorter < self.side => f64::from(self.side) / f64::from(shorter),
                _ => 1.0,
            }
        } else {
            match w.max(h) {
                longer if longer > self.side => f64::from(self.side) / f64::from(longer),
                _ => 1.0,
            }
        };
        scaled(size, ratio)
    }
}

/// The resampling filter of a resize: Pillow's filters, as torchvision and Hugging Face's
/// image processors pass them (`resample` in a `preprocessor_config.json`: 2 bilinear, 3
/// bicubic, 1 Lanczos).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resample {
    /// The triangle filter, support 1 (torchvision's default for PIL images; ResNet, ViT).
    Bilinear,
    /// Keys' cubic with a = -0.5, support 2 (CLIP, DeiT, BEiT, EfficientNet, ConvNeXt).
    Bicubic,
    /// Lanczos with three lobes, support 3.
    Lanczos,
    /// OpenCV's `INTER_LINEAR` (`opencv_bilinear`): the triangle filter without antialiasing,
    /// as ultralytics' letterbox and PaddleOCR resize with `cv2.resize`; when shrinking it
    /// reads the two nearest pixels only. To the bit: OpenCV's 8-bit arithmetic
    /// ([`crate::opencv`]).
    OpenCvBilinear,
}

/// Where a centre crop starts when the margin it leaves is odd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CropOffset {
    /// Half the margin rounded half to even: torchvision's `CenterCrop` (`crop_offset =
    /// "round"`, the default).
    HalfEven,
    /// Half the margin rounded down: Hugging Face's image processors (`crop_offset = "floor"`).
    Floor,
}

impl CropOffset {
    /// The offset of a crop of `crop` in `full`.
    pub fn of(self, full: usize, crop: u32) -> i64 {
        let margin = full as i64 - i64::from(crop);
        match self {
            CropOffset::HalfEven => (margin as f64 / 2.0).round_ties_even() as i64,
            CropOffset::Floor => margin.div_euclid(2),
        }
    }
}

/// How images become a tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Preprocess {
    /// The tensor's (width, height).
    pub size: (u32, u32),
    /// How images are brought to that size.
    pub resize: Resize,
    /// The resampling filter, as Pillow names it.
    pub resample: Resample,
    /// Where a centre crop starts.
    pub crop_offset: CropOffset,
    /// Channel layout.
    pub layout: Layout,
    /// The tensor's channels.
    pub channels: Channels,
    /// Element type.
    pub datatype: Datatype,
    /// What a pixel value (0 to 255) is multiplied by before normalization.
    pub scale: f32,
    /// The mean subtracted from each channel (in the order of the tensor's channels).
    pub mean: [f32; 3],
    /// The standard deviation each channel is divided by (same order).
    pub std: [f32; 3],
    /// Whether the tensor has a batch dimension first (one entry per image); without one a
    /// request carries exactly one image.
    pub batch: bool,
}

/// How large a request's images may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Pixels of one image (width × height), checked in its header before decoding.
    pub max_pixels: u64,
    /// What set `max_pixels`, for the refusal to name (`max_pixels`, or the host's share of a
    /// plugin's memory limit).
    pub max_pixels_set_by: &'static str,
    /// Bytes of one encoded image.
    pub max_image_bytes: u64,
    /// Images in one request.
    pub max_images: usize,
    /// The most images a request may carry for the model (from its `max_batch_size`: the
    /// host runs a larger batch as several requests), when it batches and the caller knows
    /// it: a body of more is refused before any is decoded. Not a setting: the host fills it
    /// in from the model.
    pub max_batch: Option<usize>,
}

/// The largest tensor side a configuration may ask for.
pub const MAX_SIDE: u32 = 8192;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            // A 24 MP phone photo (6000×4000) and smaller.
            max_pixels: 25_000_000,
            max_pixels_set_by: "max_pixels",
            max_image_bytes: 16 << 20,
            max_images: 32,
            max_batch: None,
        }
    }
}

impl Default for Preprocess {
    fn default() -> Preprocess {
        Preprocess {
            size: (224, 224),
            resize: Resize::Shorter(256),
            resample: Resample::Bilinear,
            crop_offset: CropOffset::HalfEven,
            layout: Layout::Nchw,
            channels: Channels::Rgb,
            datatype: Datatype::Fp32,
            scale: 1.0 / 255.0,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            batch: true,
        }
    }
}

fn number<T: std::str::FromStr>(key: &str, text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{key} = '{text}' is not a number"))
}

fn triple(key: &str, text: &str) -> Result<[f32; 3], String> {
    let values: Vec<f32> = text
        .split(',')
        .map(|part| number::<f32>(key, part))
        .collect::<Result<_, _>>()?;
    let values = match values.as_slice() {
        [one] => Ok([*one; 3]),
        _ => <[f32; 3]>::try_from(values),
    };
    match values {
        Ok(values) if values.iter().all(|v| v.is_finite()) => Ok(values),
        _ => Err(format!(
            "{key} = '{text}': give three finite numbers, one per channel (or one for all)"
        )),
    }
}

fn side(key: &str, text: &str) -> Result<u32, String> {
    match number::<u32>(key, text)? {
        n @ 1..=MAX_SIDE => Ok(n),
        _ => Err(format!("{key} = '{text}': give 1 to {MAX_SIDE} pixels")),
    }
}

fn flag(key: &str, text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{key} = '{text}': give true or false")),
    }
}

/// Every configuration key [`Preprocess::from_config`] and [`Limits::from_config`] read: what
/// a plugin's configuration (or a guest's settings for the host's `images` primitives) may hold.
pub const KEYS: [&str; 22] = [
    "size",
    "resize",
    "resample",
    "resize_shorter",
    "resize_to",
    "crop_offset",
    "pad_value",
    "letterbox_up",
    "limit_side",
    "limit_type",
    "multiple",
    "max_side",
    "layout",
    "channels",
    "datatype",
    "scale",
    "mean",
    "std",
    "batch",
    "max_pixels",
    "max_image_bytes",
    "max_images",
];

impl Preprocess {
    /// The preprocessing `config` describes (`size`, `resize`, `resize_shorter`, `resize_to`,
    /// `crop_offset`, `limit_side`,
    /// `limit_type`, `multiple`, `max_side`, `layout`, `channels`, `datatype`, `scale`, `mean`,
    /// `std`, `batch`); an error names the key. The `limit` keys are refused unless `resize =
    /// "limit"`, and `size` and `resize_shorter` with it: a key that would be ignored is a
    /// mistake.
    pub fn from_config(config: impl Fn(&str) -> Option<String>) -> Result<Preprocess, String> {
        let mut p = Preprocess::default();
        if let Some(size) = config("size") {
            p.size = match size.split_once(['x', 'X']) {
                Some((w, h)) => (side("size", w)?, side("size", h)?),
                None => {
                    let n = side("size", &size)?;
                    (n, n)
                }
            };
        }
        // `size / 0.875` rounded down, as timm (`crop_pct`) and Hugging Face's image
        // processors compute the resize before a centre crop: 256 for 224, 182 for 160.
        let shorter_default = p.size.0.min(p.size.1) * 256 / 224;
        let limit_keys =
            ["limit_side", "limit_type", "multiple", "max_side"].map(|k| (k, config(k)));
        let resize = config("resize");
        if resize.as_deref() != Some("limit")
            && let Some((key, _)) = limit_keys.iter().find(|(_, v)| v.is_some())
        {
            return Err(format!("{key} is read only with resize = 'limit'"));
        }
        p.resize = match resize.as_deref() {
            None | Some("shorter") => Resize::Shorter(match config("resize_shorter") {
                Some(n) => side("resize_shorter", &n)?,
                None => shorter_default,
            }),
            Some("stretch") => {
                let to = match config("resize_to") {
                    None => p.size,
                    Some(to) => match to.split_once(['x', 'X']) {
                        Some((w, h)) => (side("resize_to", w)?, side("resize_to", h)?),
                        None => return Err(format!("resize_to = '{to}': give WxH, as 256x256")),
                    },
                };
                if to.0 < p.size.0 || to.1 < p.size.1 {
                    return Err(format!(
                        "resize_to = {}x{} is smaller than the crop {}x{}",
                        to.0, to.1, p.size.0, p.size.1
                    ));
                }
                Resize::Stretch { to }
            }
            Some("letterbox") => Resize::Letterbox {
                pad: match config("pad_value") {
                    None => 114,
                    Some(v) => number::<u8>("pad_value", &v)
                        .map_err(|_| format!("pad_value = '{v}': give a level from 0 to 255"))?,
                },
                up: match config("letterbox_up") {
                    None => true,
                    Some(v) => flag("letterbox_up", &v)?,
                },
            },
            Some("limit") => {
                for key in ["size", "resize_shorter"] {
                    if config(key).is_some() {
                        return Err(format!(
                            "{key} is not read with resize = 'limit' (the tensor's size follows \
                             the image's); give limit_side, limit_type, multiple or max_side"
                        ));
                    }
                }
                let [side_, type_, multiple, max_side] = limit_keys.map(|(_, v)| v);
                Resize::Limit(SideLimit {
                    side: side_.map_or(Ok(736), |n| side("limit_side", &n))?,
                    at_least: match type_.as_deref() {
                        None | Some("min") => true,
                        Some("max") => false,
                        Some(other) => {
                            return Err(format!("limit_type = '{other}': give min or max"));
                        }
                    },
                    multiple: match multiple {
                        None => 32,
                        Some(n) => match number::<u32>("multiple", &n)? {
                            m @ 1..=1024 => m,
                            _ => return Err(format!("multiple = '{n}': give 1 to 1024")),
                        },
                    },
                    max_side: max_side.map_or(Ok(2000), |n| side("max_side", &n))?,
                })
            }
            Some(other) => {
                return Err(format!(
                    "resize = '{other}': give shorter, stretch, letterbox or limit"
                ));
            }
        };
        if config("resize_shorter").is_some() && !matches!(p.resize, Resize::Shorter(_)) {
            return Err("resize_shorter is read only with resize = 'shorter'".into());
        }
        if config("resize_to").is_some() && !matches!(p.resize, Resize::Stretch { .. }) {
            return Err("resize_to is read only with resize = 'stretch'".into());
        }
        if !matches!(p.resize, Resize::Letterbox { .. })
            && let Some(key) = ["pad_value", "letterbox_up"]
                .into_iter()
                .find(|key| config(key).is_some())
        {
            return Err(format!("{key} is read only with resize = 'letterbox'"));
        }
        if let Resize::Shorter(n) = p.resize
            && n < p.size.0.min(p.size.1)
        {
            return Err(format!(
                "resize_shorter = {n} is smaller than the crop {}x{}",
                p.size.0, p.size.1
            ));
        }
        p.resample = match config("resample").as_deref() {
            None | Some("bilinear") => Resample::Bilinear,
            Some("bicubic") => Resample::Bicubic,
            Some("lanczos") => Resample::Lanczos,
            Some("opencv_bilinear") => Resample::OpenCvBilinear,
            Some(other) => {
                return Err(format!(
                    "resample = '{other}': give bilinear, bicubic, lanczos or opencv_bilinear"
                ));
            }
        };
        p.crop_offset = match config("crop_offset").as_deref() {
            None | Some("round") => CropOffset::HalfEven,
            Some("floor") => CropOffset::Floor,
            Some(other) => return Err(format!("crop_offset = '{other}': give round or floor")),
        };
        p.layout = match config("layout").as_deref() {
            None | Some("NCHW") => Layout::Nchw,
            Some("NHWC") => Layout::Nhwc,
            Some(other) => return Err(format!("layout = '{other}': give NCHW or NHWC")),
        };
        p.channels = match config("channels").as_deref() {
            None | Some("RGB") => Channels::Rgb,
            Some("BGR") => Channels::Bgr,
            Some("L") => Channels::Gray,
            Some(other) => return Err(format!("channels = '{other}': give RGB, BGR or L")),
        };
        p.datatype = match config("datatype").as_deref() {
            None | Some("FP32") => Datatype::Fp32,
            Some("FP16") => Datatype::Fp16,
            Some("UINT8") => Datatype::Uint8,
            Some(other) => return Err(format!("datatype = '{other}': give FP32, FP16 or UINT8")),
        };
        if let Some(scale) = config("scale") {
            p.scale = number("scale", &scale)?;
            if !p.scale.is_finite() {
                return Err(format!("scale = '{scale}' is not finite"));
            }
        }
        if let Some(mean) = config("mean") {
            p.mean = triple("mean", &mean)?;
        }
        if let Some(std) = config("std") {
            p.std = triple("std", &std)?;
            if p.std.contains(&0.0) {
                return Err(format!("std = '{std}': a channel's std cannot be 0"));
            }
        }
        if let Some(batch) = config("batch") {
            p.batch = flag("batch", &batch)?;
        }
        Ok(p)
    }
}

impl Limits {
    /// The limits `config` sets (`max_pixels`, `max_image_bytes`, `max_images`), each at least
    /// 1; the defaults otherwise.
    pub fn from_config(config: impl Fn(&str) -> Option<String>) -> Result<Limits, String> {
        let mut limits = Limits::default();
        let positive = |key: &str, default: u64| -> Result<u64, String> {
            match config(key) {
                None => Ok(default),
                Some(text) => match number::<u64>(key, &text)? {
                    0 => Err(format!("{key} must be at least 1")),
                    n => Ok(n),
                },
            }
        };
        limits.max_pixels = positive("max_pixels", limits.max_pixels)?;
        limits.max_image_bytes = positive("max_image_bytes", limits.max_image_bytes)?;
        limits.max_images = usize::try_from(positive("max_images", limits.max_images as u64)?)
            .map_err(|_| "max_images is too large".to_owned())?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KEYS` is exactly what the two readers ask for: a key read but not listed would be
    /// refused by the host's primitives, one listed but not read would be accepted and ignored.
    #[test]
    fn keys_are_exactly_the_keys_read() {
        let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
        let config = |key: &str| {
            asked.borrow_mut().insert(key.to_owned());
            None
        };
        super::Preprocess::from_config(config).unwrap();
        super::Limits::from_config(config).unwrap();
        let listed: std::collections::BTreeSet<String> =
            super::KEYS.iter().map(|k| (*k).to_owned()).collect();
        assert_eq!(asked.into_inner(), listed);
    }

    /// Sizes as RapidOCR 1.4.4 computes them (`reduce_max_side` where the longer side is over
    /// 2000, then `DetPreProcess(736, type).resize`), read off its Python; where it returns no
    /// image (a side rounded to 0), one multiple instead.
    #[test]
    fn limit_sizes_are_rapidocrs() {
        let limit = |at_least| SideLimit {
            side: 736,
            at_least,
            multiple: 32,
            max_side: 2000,
        };
        for ((w, h), min, max) in [
            ((640, 480), (992, 736), (640, 480)),
            ((300, 200), (1088, 736), (288, 192)),
            ((1000, 800), (992, 800), (736, 576)),
            ((4032, 3024), (1984, 1504), (736, 544)),
            ((3024, 4032), (1504, 1984), (544, 736)),
            ((2001, 100), (15200, 736), (736, 32)),
            ((100, 20), (3680, 736), (96, 32)),
            ((737, 1500), (736, 1504), (352, 736)),
            ((35, 35), (736, 736), (32, 32)),
            ((1, 1), (736, 736), (32, 32)),
        ] {
            assert_eq!(limit(true).size(w, h), min, "min, {w}x{h}");
            assert_eq!(limit(false).size(w, h), max, "max, {w}x{h}");
        }
    }

    #[test]
    fn limit_keys_only_with_limit() {
        let p = from(&[
            ("resize", "limit"),
            ("limit_type", "max"),
            ("multiple", "8"),
        ])
        .unwrap();
        assert_eq!(
            p.resize,
            Resize::Limit(SideLimit {
                side: 736,
                at_least: false,
                multiple: 8,
                max_side: 2000
            })
        );
        for (pairs, says) in [
            (
                &[("limit_side", "640")][..],
                "limit_side is read only with resize = 'limit'",
            ),
            (
                &[("resize", "stretch"), ("multiple", "32")],
                "multiple is read only",
            ),
            (
                &[("resize", "limit"), ("size", "224")],
                "size is not read with resize = 'limit'",
            ),
            (
                &[("resize", "limit"), ("limit_type", "avg")],
                "give min or max",
            ),
            (&[("resize", "limit"), ("multiple", "0")], "give 1 to 1024"),
            (
                &[("resize", "limit"), ("max_side", "9000")],
                "max_side = '9000'",
            ),
        ] {
            let error = from(pairs).unwrap_err();
            assert!(error.contains(says), "{pairs:?}: {error}");
        }
    }

    fn from(pairs: &[(&str, &str)]) -> Result<Preprocess, String> {
        Preprocess::from_config(|key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn defaults_are_torchvision_imagenet() {
        let p = from(&[]).unwrap();
        assert_eq!(p.size, (224, 224));
        assert_eq!(p.resize, Resize::Shorter(256));
        assert_eq!(
            (p.layout, p.datatype, p.channels, p.batch),
            (Layout::Nchw, Datatype::Fp32, Channels::Rgb, true)
        );
    }

    #[test]
    fn every_key_is_read_and_bad_values_named() {
        let p = from(&[
            ("size", "299x320"),
            ("resize", "stretch"),
            ("layout", "NHWC"),
            ("channels", "BGR"),
            ("datatype", "UINT8"),
            ("mean", "1,2,3"),
            ("batch", "false"),
        ])
        .unwrap();
        assert_eq!(p.size, (299, 320));
        assert_eq!(
            (p.resize, p.layout, p.channels),
            (
                Resize::Stretch { to: (299, 320) },
                Layout::Nhwc,
                Channels::Bgr
            )
        );
        // Rounded down, as timm and Hugging Face do (380 / 0.875 = 434.3; 160 / 0.875 = 182.9).
        assert_eq!(
            from(&[("size", "380")]).unwrap().resize,
            Resize::Shorter(434)
        );
        assert_eq!(
            from(&[("size", "160")]).unwrap().resize,
            Resize::Shorter(182)
        );
        for (key, value, says) in [
            ("size", "0", "1 to 8192"),
            ("size", "100000", "1 to 8192"),
            ("resize_shorter", "100", "smaller than the crop"),
            ("mean", "1,2", "three finite numbers"),
            ("std", "1,0,1", "cannot be 0"),
            ("datatype", "INT8", "FP32, FP16 or UINT8"),
            ("scale", "inf", "not finite"),
        ] {
            let error = from(&[(key, value)]).unwrap_err();
            assert!(
                error.contains(says) && error.contains(key),
                "{key}: {error}"
            );
        }
        let limits = Limits::from_config(|k| (k == "max_pixels").then(|| "0".to_owned()));
        assert!(limits.unwrap_err().contains("at least 1"));
    }
}
