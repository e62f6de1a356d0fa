"""Trains a Hugging Face tokenizer of one model family's layout on a corpus this script writes
(no hub is reachable from where trident is built), with the `tokenizers` Python package, and
saves its tokenizer.json. The text examples and the text plugins' tests use it.

Usage: train_tokenizer.py FAMILY OUT.json     FAMILY: one of the FAMILIES below
       train_tokenizer.py corpus N            prints the corpus's first N lines as a JSON list

The corpus is made from fixed word lists by a seeded generator, so every run writes the same
lines: English sentences with punctuation, numbers and contractions, and lines with CJK, kana,
Hangul, Arabic, Devanagari and Thai, emoji (skin tones, ZWJ families, flags), combining marks,
odd whitespace, and special tokens written as text.
"""

import json
import random
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

WORDS = """the a an of to and in is was for on that with as it at by from be this have are not or
his her their we you they he she which one all were when there can more if out so what up said
about into than them only other time new some could these two may first then do any like my now
over such our man me even most made after also did many before must through back years where much
your way well down should because each just those people how too little state good very make
world still own see men work long get here between both life being under never day same another
know while last might us great old year off come since against go came right used take three
movie film great terrible wonderful boring loved hated acting plot story ending music scenes
review recommend awful brilliant slow funny sad beautiful dull masterpiece waste fantastic
model server inference request tensor token batch latency throughput memory plugin sandbox
""".split()

CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切边"
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン"
HANGUL = "가나다라마바사아자차카타파하한국어문장입니다좋은영화였어요최고의"
ARABIC = ["مرحبا", "بالعالم", "كتاب", "جميل", "الفيلم"]
DEVANAGARI = ["नमस्ते", "दुनिया", "फ़िल्म", "अच्छी", "थी"]
THAI = ["สวัสดี", "ภาพยนตร์", "ดีมาก"]
EMOJI = ["😀", "👍", "🎉", "❤️", "👋🏽", "👨‍👩‍👧‍👦", "🇯🇵", "🏳️‍🌈", "🤖", "🔥", "✨", "🙏🏿"]
COMBINING = ["e\u0301", "n\u0303", "a\u0308", "o\u0302\u0323", "i\u0327\u0301\u0300", "Z\u0351\u0362\u0334"]
SPECIALS = ["[CLS]", "[SEP]", "[MASK]", "<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>"]
SPACES = [" ", " ", " ", "  ", "\t", "\u00a0", " \n "]


def sentence(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 18))]
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), rng.choice(["don't", "it's", "we're", "I'm", "they'll"]))
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 100000)) + rng.choice(["", ".5", "%", "th"]))
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", "!", "?", "...", ",", ""])


def unusual(rng):
    pieces = []
    for _ in range(rng.randint(2, 8)):
        kind = rng.randrange(9)
        if kind == 0:
            pieces.append("".join(rng.choice(CJK) for _ in range(rng.randint(1, 12))))
        elif kind == 1:
            pieces.append("".join(rng.choice(KANA) for _ in range(rng.randint(1, 8))))
        elif kind == 2:
            pieces.append("".join(rng.choice(HANGUL) for _ in range(rng.randint(1, 6))))
        elif kind == 3:
            pieces.append(rng.choice(ARABIC + DEVANAGARI + THAI))
        elif kind == 4:
            pieces.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3))))
        elif kind == 5:
            word = rng.choice(WORDS)
            pieces.append(word + rng.choice(COMBINING))
        elif kind == 6:
            pieces.append(rng.choice(SPECIALS))
        elif kind == 7:
            pieces.append(rng.choice(["https://example.com/a?b=1", "x = f(y) + 2;", "C:\\path\\file.txt", "3.14159", "#tag", "@user"]))
        else:
            pieces.append(sentence(rng))
    return "".join(p + rng.choice(SPACES) for p in pieces).rstrip(" ") if rng.random() < 0.5 else " ".join(pieces)


def corpus(n):
    rng = random.Random(46)
    return [sentence(rng) if i % 3 else unusual(rng) for i in range(n)]


def bert():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=3000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return tok, trainer, lambda t: setattr(t, "post_processor", processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", t.token_to_id("[CLS]")), ("[SEP]", t.token_to_id("[SEP]"))]))


def gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tok, trainer, None


LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def llama3():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tok, trainer, lambda t: setattr(t, "post_processor", processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", t.token_to_id("<|begin_of_text|>"))])]))


def llama():
    """Llama 2's layout: SentencePiece BPE with byte fallback, spaces as '▁'."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"] + bytes_)
    return tok, trainer, lambda t: setattr(t, "post_processor", processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", t.token_to_id("<s>"))]))


def t5():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>")
    return tok, trainer, lambda t: setattr(t, "post_processor", processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B:1 </s>:1", special_tokens=[("</s>", t.token_to_id("</s>"))]))


FAMILIES = {"bert": bert, "gpt2": gpt2, "llama3": llama3, "llama": llama, "t5": t5}


def train(family):
    tok, trainer, finish = FAMILIES[family]()
    tok.train_from_iterator(corpus(2000), trainer)
    if finish:
        finish(tok)
    if family == "llama":
        # The byte tokens are the model's own, not special: byte fallback looks them up in the
        # vocabulary, and decoding keeps them whether or not special tokens are skipped.
        data = json.loads(tok.to_str())
        keep = [t for t in data["added_tokens"] if not t["content"].startswith("<0x")]
        data["added_tokens"] = keep
        tok = Tokenizer.from_str(json.dumps(data))
    return tok


def main():
    if sys.argv[1] == "corpus":
        json.dump(corpus(int(sys.argv[2])), sys.stdout, ensure_ascii=False)
        return
    family, out = sys.argv[1], sys.argv[2]
    if family not in FAMILIES:
        sys.exit(f"train_tokenizer.py: no family {family!r}: {', '.join(FAMILIES)}")
    train(family).save(out)


if __name__ == "__main__":
    main()
