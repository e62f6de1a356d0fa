"""What Hugging Face's `transformers` makes of text pairs and a request's own truncation, for the
tokenize plugin's test: the fast tokenizer of a tokenizer.json (`PreTrainedTokenizerFast`, the
`tokenizers` 0.23.3 that transformers 5.25 pins), called as a text-classification pipeline calls
it for `{"text": ..., "text_pair": ...}` inputs, rows padded to the batch's longest.

Usage: text_pairs.py TOKENIZER   (stdin: {pad_token, cases: [{pairs: [[a, b], ...], max_length,
                                  truncation}]})  prints, per case, {input_ids, attention_mask,
                                  token_type_ids}, or {error} where transformers refuses it
"""

import json
import sys

from transformers import PreTrainedTokenizerFast


def main():
    request = json.load(sys.stdin)
    tok = PreTrainedTokenizerFast(tokenizer_file=sys.argv[1], pad_token=request["pad_token"])
    answers = []
    for case in request["cases"]:
        firsts = [pair[0] for pair in case["pairs"]]
        seconds = [pair[1] for pair in case["pairs"]]
        try:
            encoded = tok(
                firsts,
                seconds,
                truncation=case["truncation"],
                max_length=case["max_length"],
                padding="longest",
                return_token_type_ids=True,
            )
        except Exception as error:  # transformers' refusal (a text too short to cut)
            answers.append({"error": str(error)})
            continue
        answers.append({key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids")})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
