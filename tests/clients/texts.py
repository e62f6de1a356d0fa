"""Texts for the text plugins' tests, and what a client expects back from them, computed with
Hugging Face's `tokenizers` Python package (its Rust core with Oniguruma, built by Hugging Face),
not with trident's code: tokenizers trained by scripts/train_tokenizer.py, ids, texts decoded
whole and as a stream, and the stand-in text classifier's formula
(backend/src/models/text_classifier.rs) with a softmax.

Usage: texts.py corpus:N                      prints the corpus's first N lines (JSON list)
       texts.py train:FAMILY:OUT              trains FAMILY's tokenizer into OUT; prints OUT
       texts.py encode:TOKENIZER   (stdin: {batches, max_length, truncation, pad_token,
                                    add_special_tokens})  prints, per batch of texts, {input_ids,
                                    attention_mask, token_type_ids}, one row per text, padded to
                                    the batch's longest
       texts.py decode:TOKENIZER   (stdin: {ids: [[...], ...], skip_special})  prints, per
                                    sequence, {text, steps}: its whole text, and the text each id
                                    adds through tokenizers.decoders.DecodeStream
       texts.py classify:TOKENIZER (stdin: {texts, max_length, labels, k})  prints, per text,
                                    [[label, score], ...], the best k
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))

from tokenizers import Tokenizer, decoders  # noqa: E402

import train_tokenizer  # noqa: E402

MASK = (1 << 64) - 1


def weight(token, segment, cls):
    """The stand-in classifier's weight of a token id of a segment for a class."""
    z = (token * 1000003 + segment * 7919 + cls) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return ((z % 2001) - 1000.0) / 1000.0


def encoded(path, request):
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    if request.get("truncation", True):
        tok.enable_truncation(request["max_length"])
    pad = request["pad_token"]
    tok.enable_padding(pad_id=tok.token_to_id(pad), pad_token=pad)
    return tok.encode_batch(request["texts"], add_special_tokens=request.get("add_special_tokens", True))


def classify(path, request):
    answers = []
    for encoding in encoded(path, {"pad_token": "[PAD]", **request}):
        counted = [(t, s) for t, s, m in zip(encoding.ids, encoding.type_ids, encoding.attention_mask) if m == 1]
        logits = [sum(weight(t, s, c) for t, s in counted) / len(counted) for c in range(len(request["labels"]))]
        top = max(logits)
        exps = [math.exp(v - top) for v in logits]
        scores = [e / sum(exps) for e in exps]
        ranked = sorted(range(len(scores)), key=lambda c: -scores[c])[: request["k"]]
        answers.append([[request["labels"][c], scores[c]] for c in ranked])
    return answers


def decoded(path, request):
    tok = Tokenizer.from_file(path)
    skip = request["skip_special"]
    answers = []
    for ids in request["ids"]:
        stream = decoders.DecodeStream(skip_special_tokens=skip)
        steps = [stream.step(tok, i) or "" for i in ids]
        answers.append({"text": tok.decode(ids, skip_special_tokens=skip), "steps": steps})
    return answers


def main():
    command, _, argument = sys.argv[1].partition(":")
    if command == "corpus":
        answer = train_tokenizer.corpus(int(argument))
    elif command == "train":
        family, _, out = argument.partition(":")
        train_tokenizer.train(family).save(out)
        answer = out
    else:
        request = json.load(sys.stdin)
        if command == "encode":
            answer = []
            for texts in request["batches"]:
                encodings = encoded(argument, {**request, "texts": texts})
                answer.append({
                    "input_ids": [e.ids for e in encodings],
                    "attention_mask": [e.attention_mask for e in encodings],
                    "token_type_ids": [e.type_ids for e in encodings],
                })
        elif command == "decode":
            answer = decoded(argument, request)
        elif command == "classify":
            answer = classify(argument, request)
        else:
            sys.exit(f"texts.py: no command {command!r}")
    json.dump(answer, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
