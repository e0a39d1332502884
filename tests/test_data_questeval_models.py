"""Data-QuestEval's QA/QG backends, synthetic corpus and training commands
(metrics/data_questeval/qa.py, qg.py; training/data_questeval/qa_data.py, synthetic.py, train.py),
on tiny random models and hand-made data."""

import doctest
import json
import math
import os

import pytest

from metrics.data_questeval import qa as qa_mod
from metrics.data_questeval import qg as qg_mod
from metrics.data_questeval.qa import QAResult, SpanQA, T5QA, load_qa
from metrics.data_questeval.qg import GeneratorQG, T5QG, answer_context, load_qg, qg_prompt
from training.data_questeval import synthetic
from training.data_questeval import train
from training.data_questeval.qa_data import QAExample, add_unanswerable, load_squad, qa_examples, qg_pairs
from training.data_questeval.qa_data import sample, squad_file, without_answer

# Table 2 of Rebuffel et al. (2021)
TABLE_2_TEXT = "james craig watson , who died from peritonitis , discovered 101 helena ."
TABLE_2_QUESTION = "Who discovered 101 helena?"


# ---------------------------------------------------------------- fixtures


def _article(title, paragraphs):
    return {"title": title, "paragraphs": [
        {"context": c, "qas": [{"id": f"{title}-{i}-{j}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}
                               for j, (q, a) in enumerate(qas)]} for i, (c, qas) in enumerate(paragraphs)]}


WEBNLG_XML = """<?xml version="1.0" ?>
<benchmark><entries>
<entry category="Astronaut" eid="Id1" size="2"><modifiedtripleset><mtriple>Alan_Bean | birthPlace | Wheeler,_Texas</mtriple>
<mtriple>Alan_Bean | occupation | Test_pilot</mtriple></modifiedtripleset>
<lex comment="good" lid="Id1"><text>Alan Bean was born in Wheeler, Texas and worked as a test pilot.</text></lex></entry>
<entry category="Airport" eid="Id2" size="2"><modifiedtripleset><mtriple>Aarhus_Airport | cityServed | "Aarhus, Denmark"</mtriple>
<mtriple>Aarhus_Airport | elevationAboveTheSeaLevel_(in_metres) | 25.0</mtriple></modifiedtripleset>
<lex comment="good" lid="Id1"><text>Aarhus Airport serves Aarhus, Denmark and is 25.0 metres above sea level.</text></lex></entry>
<entry category="Food" eid="Id3" size="2"><modifiedtripleset><mtriple>Bakewell_pudding | region | Derbyshire_Dales</mtriple>
<mtriple>Bakewell_pudding | course | Dessert</mtriple></modifiedtripleset>
<lex comment="good" lid="Id1"><text>Bakewell pudding is a dessert from the Derbyshire Dales.</text></lex></entry>
</entries></benchmark>"""


@pytest.fixture(scope="module")
def mini_shared(tmp_path_factory):
    """A shared/ folder with two tiny SQuAD halves and three WebNLG train entries."""
    root = tmp_path_factory.mktemp("shared")
    squad = root / "data" / "squad"
    squad.mkdir(parents=True)
    train_half = {"version": "1.1", "data": [
        _article("Eagle", [("The Eagle is a coffee shop near the river. It serves food in the city centre.",
                            [("What is the Eagle?", "a coffee shop"), ("Where does it serve food?", "in the city centre")])]),
        _article("Alan", [("Alan Bean was born in Wheeler, Texas. He was a test pilot.",
                           [("Where was Alan Bean born?", "Wheeler, Texas"), ("What was Alan Bean?", "a test pilot")])])]}
    test_half = {"version": "1.1", "data": [
        _article("Blue", [("Blue Spice is a pub in the riverside area. It has a high customer rating.",
                           [("What is Blue Spice?", "a pub"), ("What rating does it have?", "a high customer rating")])]),
        _article("Aarhus", [("Aarhus Airport serves the city of Aarhus, Denmark.", [("Which city does the airport serve?", "Aarhus, Denmark")])])]}
    (squad / "dev-v1.1.json").write_text(json.dumps(train_half))
    (squad / "test-v1.1.json").write_text(json.dumps(test_half))
    webnlg = root / "data" / "webnlg2017" / "xml" / "train" / "2triples"
    webnlg.mkdir(parents=True)
    (webnlg / "Mixed.xml").write_text(WEBNLG_XML)
    return str(root)


QA_TRAIN_OPTS = ["--steps", "2", "--batch-size", "2", "--max-length", "64", "--stride", "8", "--lora-r", "2", "--save-every", "1",
                 "--no-progress"]
QG_TRAIN_OPTS = ["--steps", "2", "--batch-size", "2", "--max-length", "64", "--save-every", "1", "--no-progress"]


@pytest.fixture(scope="module")
def text_qa(tiny_encoder, mini_shared, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ckpt") / "text_qa")
    assert train.main(["text-qa", "--out", out, "--shared", mini_shared, "--base", tiny_encoder] + QA_TRAIN_OPTS) == 0
    return out


@pytest.fixture(scope="module")
def text_qg(tiny_causal_lm, mini_shared, text_qa, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ckpt") / "text_qg")
    argv = ["text-qg", "--out", out, "--shared", mini_shared, "--base", tiny_causal_lm, "--qa", text_qa, "--max-dev", "3"]
    assert train.main(argv + QG_TRAIN_OPTS) == 0
    return out


def _hand_corpus(path):
    """Three synthetic rows whose answers are spans of their linearized tables."""
    from d2t_metrics.linearize import linearize

    rows = []
    for key, table, question, value in [
        ("a", "Alan_Bean | birthPlace | Wheeler,_Texas<br>Alan_Bean | occupation | Test_pilot", "Where was Alan Bean born?", "Wheeler , Texas"),
        ("b", "Aarhus_Airport | cityServed | Aarhus", "Which city does Aarhus Airport serve?", "Aarhus"),
        ("c", "Bakewell_pudding | course | Dessert", "What course is Bakewell pudding?", "Dessert"),
    ]:
        lin = linearize(table)
        start = next(v.start for v in qg_mod.table_values(lin) if v.value == value)
        rows.append({"key": key, "category": "X", "split": "train", "table": lin, "question": question, "answer": value,
                     "answer_start": start, "text": "", "text_answer": value, "qa_answer": value, "qa_answerability": 1.0, "qa_f1": 1.0})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _recipe(path):
    with open(os.path.join(path, "d2t_config.json"), encoding="utf-8") as f:
        return json.load(f)


class Spy:
    """A tokenizer that records the texts it is given."""

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, []

    def __call__(self, texts, *args, **kwargs):
        self.seen.extend(texts if isinstance(texts, list) else [texts])
        return self.tokenizer(texts, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


# ---------------------------------------------------------------- T5 backends (QuestEval)


def test_questeval_input_strings_are_pinned(tiny_seq2seq):
    assert T5QA.format_input(TABLE_2_QUESTION, TABLE_2_TEXT) == f"{TABLE_2_QUESTION} </s> {TABLE_2_TEXT}"
    qg = T5QG(tiny_seq2seq)
    assert qg.format_input("james craig watson", TABLE_2_TEXT) == f"sv1 </s> james craig watson </s> {TABLE_2_TEXT}"
    assert T5QG(tiny_seq2seq, prefix=None).format_input("x", "y") == "x </s> y"
    # the model reads exactly those strings
    qa = T5QA(tiny_seq2seq)
    qa.tokenizer = spy = Spy(qa.tokenizer)
    qa.answer([TABLE_2_QUESTION], [TABLE_2_TEXT], show_progress=False)
    assert set(spy.seen) == {"Who discovered 101 helena? </s> james craig watson , who died from peritonitis , discovered 101 helena ."}
    qg.tokenizer = spy = Spy(qg.tokenizer)
    qg.generate(["james craig watson"], [TABLE_2_TEXT], show_progress=False)
    assert set(spy.seen) == {f"sv1 </s> james craig watson </s> {TABLE_2_TEXT}"}


def test_t5_answerability_is_one_minus_the_first_step_probability(tiny_seq2seq):
    import torch

    qa = T5QA(tiny_seq2seq)
    questions = ["who is born in the city?", "what is the food?"]
    contexts = ["the eagle is born in the city of blue", "the pub serves food near the river"]
    results = qa.answer(questions, contexts, show_progress=False)
    model, tok = qa.model, qa.tokenizer
    start = model.generation_config.decoder_start_token_id
    for q, c, r in zip(questions, contexts, results):
        enc = tok([T5QA.format_input(q, c)], return_tensors="pt")
        with torch.inference_mode():
            logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                           decoder_input_ids=torch.tensor([[start]])).logits[0, -1]
        p = float(logits.softmax(-1)[qa.unanswerable_token_id])
        assert 0.0 <= r.answerability <= 1.0
        assert r.answerability == pytest.approx(1 - p, abs=1e-5)
    # the token read is the first piece of "unanswerable" for a non-T5 vocabulary
    assert qa.unanswerable_token_id == tok("unanswerable", add_special_tokens=False)["input_ids"][0]


def test_t5_padding_and_batching_change_no_result(tiny_seq2seq):
    questions = ["who is born in the city?", "what?", "where is the eagle near the river and the city?"]
    contexts = ["the eagle is born in the city of blue", "x", "the eagle coffee shop is near the river"]
    dynamic = T5QA(tiny_seq2seq).answer(questions, contexts, batch_size=2, show_progress=False)
    padded = T5QA(tiny_seq2seq, pad_to_max_length=True, max_source_length=128).answer(questions, contexts, show_progress=False)
    one_by_one = [T5QA(tiny_seq2seq).answer([q], [c], show_progress=False)[0] for q, c in zip(questions, contexts)]
    for a, b, c in zip(dynamic, padded, one_by_one):
        assert a.answer == b.answer == c.answer
        assert a.answerability == pytest.approx(b.answerability, abs=1e-5) == pytest.approx(c.answerability, abs=1e-5)
    qg = T5QG(tiny_seq2seq)
    assert qg.generate(["a", "the eagle"], contexts[:2], batch_size=1, show_progress=False) == \
        T5QG(tiny_seq2seq, pad_to_max_length=True, max_source_length=128).generate(["a", "the eagle"], contexts[:2], show_progress=False)
    assert qg.generate([], [], show_progress=False) == [] and T5QA(tiny_seq2seq).answer([], [], show_progress=False) == []
    many = qg.generate_alternatives(["a", "the eagle"], contexts[:2], 2, show_progress=False)
    assert len(many) == 2 and all(len(qs) <= 2 and len(set(qs)) == len(qs) for qs in many)
    assert qg.generate_alternatives(["a"], contexts[:1], 1, show_progress=False) == \
        [[q] if q.strip() else [] for q in qg.generate(["a"], contexts[:1], show_progress=False)]


def test_t5_unanswerable_answer_means_no_answer(tiny_seq2seq, monkeypatch):
    qa = T5QA(tiny_seq2seq)
    monkeypatch.setattr(qa._runner, "run", lambda batch, score_id: [("unanswerable", 0.9), ("Wheeler , Texas", 0.25)][: len(batch)])
    results = qa.answer(["q1", "q2"], ["c", "c"], batch_size=2, show_progress=False)
    assert results == [QAResult("", pytest.approx(0.1)), QAResult("Wheeler , Texas", 0.75)]


def test_questeval_reads_column_73_of_t5s_vocabulary():
    class T5SizedTokenizer:
        def __len__(self):
            return 32100

    assert qa_mod.t5_unanswerable_token_id(T5SizedTokenizer(), "t5") == 73


def test_mismatched_inputs_are_refused(tiny_seq2seq):
    with pytest.raises(ValueError, match="differ in length"):
        T5QA(tiny_seq2seq).answer(["a", "b"], ["c"], show_progress=False)
    with pytest.raises(ValueError, match=r"contexts\[0\] is not a string"):
        T5QG(tiny_seq2seq).generate(["a"], [None], show_progress=False)


# ---------------------------------------------------------------- span QA


def test_windows_overlap_by_the_stride_and_are_capped(text_qa):
    qa = load_qa(text_qa)
    context = " ".join(f"word{i} is near the river" for i in range(60))
    windows, read = qa.windows(["where is it?"], [context])
    assert len(windows) > 2 and read == [context]
    for a, b in zip(windows, windows[1:]):
        a_ctx = a.offsets[a.context_start: a.context_end + 1]
        b_ctx = b.offsets[b.context_start: b.context_end + 1]
        assert a_ctx[-qa.stride:] == b_ctx[: qa.stride]  # consecutive windows share exactly `stride` context tokens
        assert len(a.input_ids) <= qa.max_length
    assert windows[0].offsets[windows[0].context_start][0] == 0
    assert windows[-1].offsets[windows[-1].context_end][1] == len(context)  # the whole context is read
    capped = SpanQA(text_qa, max_windows=2).windows(["where is it?"], [context])[0]
    assert len(capped) == 2


def test_window_probabilities_match_enumeration():
    import torch

    torch.manual_seed(0)
    n = 12
    window = qa_mod.Window(0, list(range(n)), None, 4, 9, [(k * 3, k * 3 + 2) for k in range(n)])
    start, end = torch.randn(n) * 2, torch.randn(n) * 2
    reading = qa_mod.read_window(start, end, window, max_answer_tokens=3)
    outcomes = {None: math.exp(start[0] + end[0])}
    for i in range(4, 10):
        for j in range(i, min(10, i + 3)):
            outcomes[(i, j)] = math.exp(start[i] + end[j])
    total = sum(outcomes.values())
    best = max((k for k in outcomes if k), key=outcomes.get)
    assert reading.p_null == pytest.approx(outcomes[None] / total, rel=1e-5)
    assert reading.span_logp == pytest.approx(math.log(outcomes[best] / total), rel=1e-5)
    assert reading.span == (best[0] * 3, best[1] * 3 + 2)


def test_combining_windows_prefers_the_best_span_and_abstains_when_every_window_does():
    R = qa_mod.WindowReading
    context = "Alan Bean was born in Wheeler, Texas."
    both = [R(0.9, math.log(0.05), (0, 4)), R(0.2, math.log(0.7), (22, 36)), R(0.3, math.log(0.6), (0, 9))]
    assert qa_mod.combine_windows(both, context) == QAResult("Wheeler, Texas", pytest.approx(0.8))
    null_everywhere = [R(0.6, math.log(0.3), (0, 4)), R(0.9, math.log(0.05), (22, 36))]
    assert qa_mod.combine_windows(null_everywhere, context) == QAResult("", pytest.approx(0.4))
    assert qa_mod.combine_windows([], context) == QAResult("", 0.0)


def test_span_qa_answers_are_spans_or_empty(text_qa):
    qa = load_qa(text_qa)
    questions = ["where was alan born?", "what is the eagle?", "who?", "what is it?"]
    contexts = ["alan bean was born in wheeler, texas.", "the eagle is a coffee shop near the river. " * 30, "", "a pub"]
    results = qa.answer(questions, contexts, batch_size=3, show_progress=False)
    for r, c in zip(results, contexts):
        assert isinstance(r, QAResult) and 0.0 <= r.answerability <= 1.0
        assert r.answer == "" or r.answer in c
    assert results[2] == QAResult("", 0.0)  # no context: nothing to answer from
    one_by_one = [qa.answer([q], [c], show_progress=False)[0] for q, c in zip(questions, contexts)]
    padded = SpanQA(text_qa, pad_to_max_length=True).answer(questions, contexts, show_progress=False)
    for a, b, c in zip(results, one_by_one, padded):
        assert a.answer == b.answer == c.answer
        assert a.answerability == pytest.approx(b.answerability, abs=1e-5) == pytest.approx(c.answerability, abs=1e-5)


def test_span_qa_survives_hostile_lengths(text_qa):
    qa = load_qa(text_qa)
    huge = "the river " * 100_000  # 1 MB
    results = qa.answer(["where? " * 5000, "what is near?"], ["x", huge], show_progress=False)
    assert len(results) == 2 and all(0.0 <= r.answerability <= 1.0 for r in results)
    windows, _ = qa.windows(["what is near?"], [huge])
    assert len(windows) == qa.max_windows


def test_training_labels_point_at_the_answer_tokens(text_qa):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(text_qa)
    context = "the eagle is a coffee shop near the river. " * 6 + "alan bean was born in wheeler."
    examples = [QAExample("where was alan born?", context, "wheeler", context.index("wheeler"), "g"),
                QAExample("what?", "a pub", "", -1, "h")]
    features = train.qa_features(tok, examples, max_length=64, stride=6)
    windows, _ = qa_mod.encode_windows(tok, [e.question for e in examples], [e.context for e in examples], 64, 6,
                                       qa_mod.SPAN_MAX_QUESTION_TOKENS, 8)
    labelled = [(f, w) for f, w in zip(features, windows) if f["start_positions"]]
    assert labelled, "the window holding the answer is labelled"
    for f, w in labelled:
        assert context[w.offsets[f["start_positions"]][0]: w.offsets[f["end_positions"]][1]] == "wheeler"
    assert any(f["start_positions"] == 0 for f, w in zip(features, windows) if w.example == 0)  # windows without it: no answer
    assert all(f["start_positions"] == f["end_positions"] == 0 for f, w in zip(features, windows) if w.example == 1)


# ---------------------------------------------------------------- generator QG


def test_generator_prompts_are_pinned_and_cleaned(text_qg, monkeypatch):
    assert qg_prompt("james craig watson", TABLE_2_TEXT) == \
        f"Context: {TABLE_2_TEXT}\nWrite a question whose answer is: james craig watson\nQuestion:"
    table = "entity [ 101 Helena ] , discoverer [ James Craig Watson ]"
    assert qg_prompt("James Craig Watson", table, "table") == \
        f"Table: {table}\nWrite a question about the table whose answer is: James Craig Watson\nQuestion:"
    assert qg_prompt("a\n b", "x \n\t y") == "Context: x y\nWrite a question whose answer is: a b\nQuestion:"
    with pytest.raises(ValueError, match="unknown context kind"):
        qg_prompt("a", "b", "image")
    qg = load_qg(text_qg)
    assert isinstance(qg, GeneratorQG) and qg.context_kind == "text"
    seen = []

    def fake_generate(model, tokenizer, prompts, **kwargs):
        seen.extend(prompts)
        return ["Who discovered 101 helena? Who else?", ""][: len(prompts)]

    monkeypatch.setattr("d2t_metrics.generator.generate", fake_generate)
    assert qg.generate(["james craig watson", "x"], [TABLE_2_TEXT, "y"], show_progress=False) == ["Who discovered 101 helena?", ""]
    assert seen == [qg_prompt("james craig watson", TABLE_2_TEXT), qg_prompt("x", "y")]
    seen.clear()
    qg.generate(["James Craig Watson"], [table], context_kind="table", show_progress=False)
    assert seen == [qg_prompt("James Craig Watson", table, "table")]


def test_generator_qg_runs_on_the_tiny_model(text_qg):
    qg = load_qg(text_qg)
    out = qg.generate(["the eagle", "a pub", "x"], ["the eagle is a coffee shop", "blue spice is a pub", ""], batch_size=2,
                      show_progress=False)
    assert len(out) == 3 and all(isinstance(q, str) and "\n" not in q for q in out)
    # beam search: up to n distinct questions each, best first; n=1 is the greedy question
    answers, contexts = ["the eagle", "a pub"], ["the eagle is a coffee shop", "blue spice is a pub"]
    many = qg.generate_alternatives(answers, contexts, 3, batch_size=4, show_progress=False)
    assert len(many) == 2 and all(1 <= len(qs) <= 3 and len(set(qs)) == len(qs) for qs in many)
    assert all(q.strip() and "\n" not in q for qs in many for q in qs)
    assert qg.generate_alternatives(answers, contexts, 3, batch_size=1, show_progress=False) == many
    greedy = qg.generate(answers, contexts, show_progress=False)
    assert qg.generate_alternatives(answers, contexts, 1, show_progress=False) == [[q] if q else [] for q in greedy]
    assert qg.generate_alternatives([], [], 3, show_progress=False) == []
    with pytest.raises(ValueError, match="num_alternatives"):
        qg.generate_alternatives(answers, contexts, 0, show_progress=False)


def test_span_qa_reads_special_strings_in_user_text_as_characters(text_qa):
    """Issue 38: "[SEP]" or "[CLS]" inside a question or a context must not become the encoder's markers."""
    qa = load_qa(text_qa)
    specials = set(qa.tokenizer.all_special_ids)
    context = "alan bean [SEP] was born in [SEP] wheeler, texas [CLS] [MASK] [PAD] and was a pilot."
    windows, _ = qa.windows(["where was [SEP] alan born?"], [context])
    ids = windows[0].input_ids
    inside = ids[1: windows[0].context_end + 1]  # the question, its separator and the context
    sep = qa.tokenizer.sep_token_id
    assert ids[0] == qa.tokenizer.cls_token_id and ids[-1] == sep
    assert [i for i in inside if i in specials] == [sep]  # only the separator the tokenizer added itself
    assert qa.answer(["where?"], [context], show_progress=False)[0].truncated is False


def test_generator_qg_reads_special_strings_in_user_text_as_characters(text_qg):
    qg = load_qg(text_qg)
    prompt = qg.prompts(["wheeler [SEP] texas"], ["alan bean [SEP] was born in [CLS] wheeler [MASK] texas."])[0]
    ids = qg.tokenizer(prompt, add_special_tokens=False)["input_ids"]  # the markers the tokenizer adds itself aside
    assert not set(ids) & set(qg.tokenizer.all_special_ids)


def test_t5_inputs_escape_special_strings_in_user_text(tiny_seq2seq, monkeypatch):
    """QuestEval's prompts hold the literal separator; the user's part is escaped, the template's kept."""
    qa, qg = T5QA(tiny_seq2seq), T5QG(tiny_seq2seq, prefix=None)
    qa.format_input, qg.format_input = (lambda q, c: f"{q} [SEP] {c}"), (lambda a, c: f"{a} [SEP] {c}")  # a live separator
    seen = []
    monkeypatch.setattr(type(qa._runner), "run", lambda self, inputs, score_id: seen.extend(inputs) or [("x", 0.5)] * len(inputs))
    monkeypatch.setattr(type(qg), "_run", lambda self, inputs, num_beams=1: seen.extend(inputs) or ["q?"] * len(inputs) * num_beams)
    qa.answer(["who [SEP] is it?"], ["alan [SEP] bean [CLS] was [MASK] here"], show_progress=False)
    qg.generate(["alan [SEP] bean"], ["alan [SEP] bean was here"], show_progress=False)
    sep = qa.tokenizer.sep_token_id
    for text in seen:
        ids = qa.tokenizer(text)["input_ids"]
        assert ids.count(sep) == 2 and ids.count(qa.tokenizer.cls_token_id) == 1  # the template's and the final one
        assert "[ SEP]" in text and "[MASK]" not in text


def test_span_qa_flags_a_context_longer_than_its_windows(text_qa):
    context = " ".join(f"word{i} is near the river" for i in range(60))
    capped = SpanQA(text_qa, max_windows=2)
    whole = SpanQA(text_qa, max_windows=32)
    assert [r.truncated for r in capped.answer(["where is it?", "who?"], [context, "a pub"], show_progress=False)] == [True, False]
    assert whole.answer(["where is it?"], [context], show_progress=False)[0].truncated is False
    huge = "the river " * 10_000  # longer than the characters that max_windows windows can hold: cut before tokenizing
    assert capped.answer(["what?"], [huge], show_progress=False)[0].truncated is True


def test_table_qg_reads_a_huge_table_around_the_value():
    small = "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ]"
    value = qg_mod.table_values(small)[1]
    assert qg_mod.table_answer_context(small, value.start, value.end) == small  # every WebNLG / E2E table: whole
    huge = " , ".join(f"p{i} [ v{i} ]" for i in range(500))
    values = qg_mod.table_values(huge)
    for v in (values[0], values[250], values[-1]):
        read = qg_mod.table_answer_context(huge, v.start, v.end)
        assert len(read.split()) <= qg_mod.TABLE_QG_CONTEXT_WORDS and f"[ {v.value} ]" in read


# ---------------------------------------------------------------- training commands


def test_text_qa_command_records_command_sizes_and_scores(text_qa):
    from d2t_metrics.checkpoints import checkpoint_size

    recipe = _recipe(text_qa)
    assert recipe["task"] == "question-answering" and recipe["kind"] == "data-questeval-qa" and recipe["context_kind"] == "text"
    training = recipe["training"]
    assert training["command"].startswith("python -m training.data_questeval.train text-qa --out ")
    assert training["squad_questions"] == 4 and training["unanswerable"] == 2 and training["examples"] == 6
    scores = recipe["dev_scores"]
    assert scores["n"] == 5 and scores["answerable"]["n"] == 3 and scores["unanswerable"]["n"] == 2
    assert 0.0 <= scores["answerable"]["f1"] <= 1.0 and 0.0 <= scores["answerability_accuracy"] <= 1.0
    adapter = json.load(open(os.path.join(text_qa, "adapter_config.json")))
    assert adapter["task_type"] == "QUESTION_ANS" and adapter["modules_to_save"] == ["qa_outputs"]
    assert recipe["max_length"] == 64 and recipe["stride"] == SpanQA(text_qa).stride
    assert 0 < checkpoint_size(text_qa) < 16 * 2**20
    assert not os.path.exists(os.path.join(text_qa, "config.json"))


def test_span_qa_training_passes_token_types_on(tiny_encoder, mini_shared, tmp_path, monkeypatch):
    # peft's PeftModelForQuestionAnswering.forward drops token_type_ids: a model trained through it
    # never saw the segment ids SpanQA gives it at inference (the shipped checkpoints, see below)
    import transformers

    seen = []
    forward = transformers.BertForQuestionAnswering.forward

    def spy(self, *args, **kwargs):
        if self.training:
            seen.append(kwargs.get("token_type_ids"))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(transformers.BertForQuestionAnswering, "forward", spy)
    out = str(tmp_path / "qa")
    assert train.main(["text-qa", "--out", out, "--shared", mini_shared, "--base", tiny_encoder] + QA_TRAIN_OPTS) == 0
    assert seen and all(t is not None and int(t.max()) == 1 for t in seen)
    assert _recipe(out)["token_type_ids"] is True


@pytest.mark.parametrize("reads_types", [True, False])
def test_span_qa_gives_token_types_only_to_a_model_trained_with_them(text_qa, reads_types):
    qa = SpanQA(text_qa)
    qa = SpanQA.from_model(qa.tokenizer, qa.model, dict(qa.recipe, token_type_ids=reads_types))
    seen = []
    handle = qa.model.register_forward_pre_hook(lambda m, a, kw: seen.append("token_type_ids" in kw), with_kwargs=True)
    try:
        qa.answer(["Who?"], ["Alan Bean was born in Wheeler."], show_progress=False)
    finally:
        handle.remove()
    assert seen == [reads_types]


def test_shipped_text_qa_reproduces_its_recorded_dev_scores(shared):
    # the recipe's scores were computed on the model in memory at the end of training; the
    # checkpoint as loaded must give them again (it gave F1 0.399 against 0.540 before the fix)
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "checkpoints", "data_questeval", "text_qa")
    recipe = _recipe(path)
    training = recipe["training"]
    seed = training["seed"]
    assert f"--seed {seed}" in training["command"] and ("--hard-share" in training["command"]) == ("hard_share" in training)
    dev_q = sample(load_squad(squad_file(shared, heldout=True)), recipe["dev_scores"]["answerable"]["n"], seed)
    dev = add_unanswerable(qa_examples(dev_q), training["unanswerable_ratio"], seed=seed + 1, hard_share=training.get("hard_share", 0.0))
    scores = train.qa_dev_scores(load_qa(path), dev)
    assert scores["answerable"] == recipe["dev_scores"]["answerable"]
    assert scores["answerability_accuracy"] == recipe["dev_scores"]["answerability_accuracy"]


def test_text_qa_command_resumes_a_stopped_run(tiny_encoder, mini_shared, tmp_path):
    from d2t_metrics.generator import last_trainer_checkpoint

    out = str(tmp_path / "qa")
    argv = ["text-qa", "--out", out, "--shared", mini_shared, "--base", tiny_encoder] + QA_TRAIN_OPTS
    argv[argv.index("--steps") + 1] = "3"
    assert train.main(argv + ["--max-minutes", "0"]) == 3  # stopped after its first step, state saved, no checkpoint yet
    assert last_trainer_checkpoint(out + ".work") and not os.path.exists(out)
    assert train.main(argv) == 0
    recipe = _recipe(out)
    assert recipe["training"]["steps"] == 3 and "dev_scores" in recipe


def test_text_qg_command_records_round_trip_scores(text_qg, text_qa):
    recipe = _recipe(text_qg)
    assert recipe["task"] == "causal-lm" and recipe["kind"] == "data-questeval-qg" and recipe["context_kind"] == "text"
    assert recipe["prompts"]["text"] == qg_mod.PROMPTS["text"]
    assert recipe["training"]["pairs"] == 4 and recipe["training"]["command"].startswith("python -m training.data_questeval.train text-qg")
    scores = recipe["dev_scores"]
    assert scores["n"] == 3 and len(scores["examples"]) == 3 and 0.0 <= scores["token_f1_vs_gold"] <= 1.0
    assert scores["round_trip"]["qa"] and 0.0 <= scores["round_trip"]["share_answered_correctly"] <= 1.0


def test_heldout_training_questions_leave_out_the_dev_paragraphs(mini_shared):
    heldout = load_squad(squad_file(mini_shared, heldout=True))
    dev = [q for q in heldout if q.title == "Blue"][:1]
    added = train.heldout_training_questions(heldout, dev)
    assert [q.question for q in added] == ["Which city does the airport serve?"]  # Blue's other question shares dev's paragraph
    assert train.heldout_training_questions(heldout, []) == heldout


def test_text_qg_command_can_also_train_on_the_heldout_half(tiny_causal_lm, mini_shared, text_qa, text_qg, tmp_path):
    out = str(tmp_path / "qg")
    argv = ["text-qg", "--out", out, "--shared", mini_shared, "--base", tiny_causal_lm, "--qa", text_qa, "--max-dev", "1",
            "--heldout-train"]
    assert train.main(argv + QG_TRAIN_OPTS) == 0
    training = _recipe(out)["training"]
    heldout = load_squad(squad_file(mini_shared, heldout=True))
    added = train.heldout_training_questions(heldout, sample(heldout, 1, 13))
    assert training["heldout_pairs_added"] == len(added) > 0
    assert training["pairs"] == 4 + len(added) and "second half" in training["data"]
    assert "heldout_pairs_added" not in _recipe(text_qg)["training"]  # a default run's recipe reads as before


def test_text_qa_command_can_also_train_on_the_heldout_half(tiny_encoder, mini_shared, text_qa, tmp_path):
    out = str(tmp_path / "qa")
    argv = ["text-qa", "--out", out, "--shared", mini_shared, "--base", tiny_encoder, "--max-dev", "1", "--heldout-train"]
    assert train.main(argv + QA_TRAIN_OPTS) == 0
    training = _recipe(out)["training"]
    heldout = load_squad(squad_file(mini_shared, heldout=True))
    added = train.heldout_training_questions(heldout, sample(heldout, 1, 13))
    assert training["heldout_questions_added"] == len(added) > 0
    assert training["squad_questions"] == len(load_squad(squad_file(mini_shared))) + len(added)
    assert "second half" in training["data"]
    assert "heldout_questions_added" not in _recipe(text_qa)["training"]  # a default run's recipe reads as before


def test_synthesize_command_writes_corpus_and_stats_and_resumes(text_qg, text_qa, mini_shared, tmp_path):
    out = str(tmp_path / "syn" / "synthetic_webnlg.jsonl")
    argv = ["synthesize", "--qg", text_qg, "--qa", text_qa, "--out", out, "--shared", mini_shared, "--chunk-size", "1",
            "--f1-threshold", "0", "--no-progress"]
    assert train.main(argv + ["--max-minutes", "0"]) == 3  # one chunk done, then stopped
    assert len([f for f in os.listdir(out + ".work") if f.endswith(".counts.json")]) == 1 and not os.path.exists(out)
    assert train.main(argv) == 0
    stats = json.load(open(str(tmp_path / "syn" / "synthetic_webnlg.stats.json")))
    assert stats["finished"] and stats["settings"]["texts"] == 3
    # every table value found in its text is a candidate: 3 per entry here
    assert stats["outcomes"]["candidates"] == 9 and stats["outcomes"]["texts"] == 3
    assert sum(v for k, v in stats["outcomes"].items() if k.startswith(("kept", "dropped"))) == 9
    rows = synthetic.read_jsonl(out)
    assert stats["rows"] == len(rows) and stats["answers_not_spans_of_table"] == 0
    with pytest.raises(ValueError, match="other settings"):
        train.main(argv[:-3] + ["--f1-threshold", "0.9", "--no-progress"])


class FakeQG:
    def __init__(self, questions):
        self.questions, self.seen = questions, []

    def generate(self, answers, contexts, batch_size=32, show_progress=True):
        self.seen.extend(zip(answers, contexts))
        return [self.questions.get(a, "") for a in answers]


class FakeQA:
    def __init__(self, answers):
        self.answers = answers

    def answer(self, questions, contexts, batch_size=32, show_progress=True):
        return [QAResult(self.answers.get(q, ""), 0.9 if q in self.answers else 0.1) for q in questions]


def test_synthetic_filter_keeps_questions_whose_answer_is_the_table_value():
    from d2t_metrics.linearize import linearize

    items = [synthetic.SourceText("k1", "Astronaut", linearize("Alan_Bean | birthPlace | Wheeler,_Texas<br>Alan_Bean | occupation | Test_pilot"),
                                  "Alan Bean was born in Wheeler, Texas and worked as a Test Pilot."),
             synthetic.SourceText("k2", "Food", linearize("Bakewell_pudding | course | Dessert<br>Bakewell_pudding | region | Derbyshire_Dales"),
                                  "Bakewell pudding is a sweet dish.")]
    qg = FakeQG({"Wheeler, Texas": "Where was Alan Bean born?", "Test Pilot": "What did Alan Bean work as?",
                 "Alan Bean": "Who is Alan Bean?", "Bakewell pudding": ""})
    qa = FakeQA({"Where was Alan Bean born?": "Wheeler, Texas", "What did Alan Bean work as?": "astronaut",
                 "Who is Alan Bean?": "Alan Bean"})
    rows, counts = synthetic.synthesize(items, qg, qa, f1_threshold=0.5, show_progress=False)
    # the QG is asked with the value's words in the text, on the text
    assert ("Wheeler, Texas", items[0].text) in qg.seen and ("Test Pilot", items[0].text) in qg.seen
    assert counts == {"texts": 2, "candidates": 4, "kept": 1, "dropped_qa_mismatch": 1, "dropped_answer_in_question": 1,
                      "dropped_empty_question": 1}
    (row,) = rows
    assert row["question"] == "Where was Alan Bean born?" and row["answer"] == "Wheeler , Texas" and row["text_answer"] == "Wheeler, Texas"
    assert row["table"][row["answer_start"]: row["answer_start"] + len(row["answer"])] == "Wheeler , Texas"
    assert row["qa_f1"] == 1.0 and row["split"] == "train"
    assert synthetic.corpus_stats(rows)["answers_not_spans_of_table"] == 0


def test_table_values_and_their_mentions():
    lin = "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , x [ ] , y [ a [ b ]"
    values = qg_mod.table_values(lin)
    assert [v.value for v in values] == ["Alan Bean", "Wheeler , Texas", "a [ b"]
    assert all(lin[v.start: v.end] == v.value for v in values)
    assert synthetic.find_in_text("Wheeler , Texas", "born in wheeler, Texas.") == (8, 22)
    assert synthetic.find_in_text("Ham", "Hampshire") is None  # whole words only
    assert synthetic.find_in_text("25.0", "is 25.0 metres") == (3, 7)
    text = "the Adolfo Suárez Madrid–Barajas Airport"
    start, end = synthetic.find_in_text("Adolfo Suarez Madrid - Barajas Airport", text)
    assert text[start:end] == "Adolfo Suárez Madrid–Barajas Airport"


def test_hard_unanswerable_table_is_the_table_without_the_answers_fact():
    lin = "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , occupation [ Test pilot ] , entity [ NASA ] , country [ US ]"

    def without(value, gold=None):
        start = lin.index(value)
        return synthetic.table_without_answer(lin, start, start + len(value), gold or [value])

    assert without("Wheeler , Texas") == "entity [ Alan Bean ] , occupation [ Test pilot ] , entity [ NASA ] , country [ US ]"
    assert without("US") == "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , occupation [ Test pilot ] , entity [ NASA ]"
    assert without("Alan Bean") is None  # an entity header: its facts would be orphaned
    assert without("Test pilot", ["Test pilot", "NASA"]) is None  # another item still answers
    assert synthetic.table_without_answer(lin, 0, 3, ["x"]) is None  # not inside a value
    assert synthetic.table_without_answer("name [ A ] , near [ A pub ]", 20, 25, ["A pub"]) == "name [ A ]"
    assert synthetic.table_without_answer("eatType [ pub ] , near [ The pub ]", 10, 13, ["pub"]) is None
    rows = [{"key": k, "split": "train", "table": lin, "question": f"q{k}?", "answer": v, "answer_start": lin.index(v)}
            for k, v in [("a", "Wheeler , Texas"), ("b", "Test pilot"), ("c", "US")]]
    rows.append({"key": "d", "split": "train", "table": "entity [ Paris ] , country [ France ]", "question": "q?",
                 "answer": "France", "answer_start": 29})
    mixed = synthetic.table_qa_examples(rows, unanswerable_ratio=1.0, seed=3, hard_share=1.0)
    hard = [e for e in mixed if e.source.endswith(":unanswerable:removed")]
    assert len(hard) == 4 and all(e.answer == "" and e.answer_start == -1 for e in hard)
    for e in hard:
        original = next(r for r in rows if r["question"] == e.question)
        assert original["answer"] not in e.context and e.group == original["key"]
    assert synthetic.table_qa_examples(rows, unanswerable_ratio=1.0, seed=3) == \
        synthetic.table_qa_examples(rows, unanswerable_ratio=1.0, seed=3, hard_share=0.0)


def _text_rows():
    lin = "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ] , occupation [ Test pilot ]"
    return [
        {"key": "a", "split": "train", "table": lin, "question": "Where was Alan Bean born?", "answer": "Wheeler , Texas",
         "text": "Alan Bean was a test pilot. He was born in Wheeler, Texas.", "text_answer": "Wheeler, Texas"},
        {"key": "b", "split": "train", "table": "entity [ Alan Bean ] , occupation [ Test pilot ]",
         "question": "What was Alan Bean's job?", "answer": "Test pilot", "text": "Alan Bean worked as a test pilot.",
         "text_answer": "test pilot"},
        {"key": "c", "split": "train", "table": "entity [ Alan Bean ] , nationality [ United States ]",
         "question": "What was Alan Bean's nationality?", "answer": "United States", "text": "Alan Bean was American.",
         "text_answer": "American"},
        {"key": "d", "split": "dev", "table": "entity [ Paris ] , country [ France ]", "question": "Where is Paris?",
         "answer": "France", "text": "Paris is in France.", "text_answer": "France"},
        {"key": "e", "split": "train", "table": "entity [ Rome ] , country [ Italy ]", "question": "Where is Rome?",
         "answer": "Italy", "text": "Rome is in Italy.", "text_answer": "Italy"},
    ]


def test_in_domain_text_qa_examples_are_text_spans_with_same_subject_negatives():
    rows = _text_rows()
    assert synthetic.table_subject(rows[0]["table"]) == "Alan Bean" and synthetic.table_subject("name [ A ]") == ""
    assert synthetic.table_subject("entity [ A [ b ] , x [ y ]") == "A [ b" and synthetic.table_subject("<br>") == ""
    remove = synthetic.same_subject_text(rows, seed=1)
    first = rows[0]["text"]
    start = first.index("Wheeler")
    # two sentences: the answer's own is taken out
    assert remove(first, start, start + len("Wheeler, Texas"), ["Wheeler, Texas"]) == "Alan Bean was a test pilot."
    # one sentence: another text about Alan Bean that does not hold the answer ("test pilot" is in the first)
    one = rows[1]["text"]
    got = {remove(one, one.index("test"), one.index("test") + 10, ["test pilot"]) for _ in range(10)}
    assert got == {"Alan Bean was American."}
    assert remove("Rome is in Italy.", 11, 16, ["Italy"]) is None  # no other text about Rome

    train = synthetic.text_qa_examples(rows, "train", unanswerable_ratio=1.0, seed=3, hard_share=1.0)
    answerable = [e for e in train if e.answerable]
    assert len(answerable) == 4 and {e.group for e in answerable} == {"a", "b", "c", "e"}
    for e in answerable:
        assert e.context[e.answer_start: e.answer_start + len(e.answer)] == e.answer
        assert e.source == synthetic.CORPUS_TEXT_SOURCE
    for e in train:
        if not e.answerable:
            original = next(r for r in rows if r["question"] == e.question)
            assert original["text_answer"].lower() not in e.context.lower() and e.context != original["text"]
    hard = [e for e in train if e.source.endswith(":unanswerable:removed")]
    about_bean = {r["text"] for r in rows[:3]} | {"Alan Bean was a test pilot."}
    assert {e.context for e in hard} <= about_bean
    assert len(hard) == 3  # Rome has no other text: its negative is another entry's text
    dev = synthetic.text_qa_examples(rows, "dev")
    assert [e.group for e in dev if e.answerable] == ["d"]
    # a train question's negative is never a dev text, even about the same entity
    rows.append(dict(rows[2], key="f", split="dev", text="Alan Bean flew on Apollo 12."))
    train = synthetic.text_qa_examples(rows, "train", unanswerable_ratio=1.0, seed=3, hard_share=1.0)
    assert all(e.context != "Alan Bean flew on Apollo 12." for e in train)


def test_text_qa_command_trains_on_the_corpus_texts_when_given_one(tiny_encoder, mini_shared, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(dict(r, answer_start=r["table"].index(r["answer"]))) + "\n" for r in _text_rows()))
    out = str(tmp_path / "qa")
    argv = ["text-qa", "--out", out, "--shared", mini_shared, "--base", tiny_encoder, "--corpus", str(corpus), "--hard-share", "1"]
    assert train.main(argv + QA_TRAIN_OPTS) == 0
    recipe = _recipe(out)
    training = recipe["training"]
    assert training["webnlg_examples"] == 4 + training["webnlg_unanswerable"] and training["webnlg_unanswerable_removed"] >= 2
    assert training["corpus"]["rows"] == 5 and "--corpus" in training["command"]
    assert recipe["dev_scores_webnlg"]["answerable"]["n"] == 1 and recipe["dev_scores"]["n"] > 1


def test_table_commands_warm_start_from_the_text_models(text_qa, text_qg, mini_shared, tmp_path):
    from d2t_metrics.checkpoints import checkpoint_size

    corpus = _hand_corpus(tmp_path / "corpus.jsonl")
    qa_out = str(tmp_path / "table_qa")
    argv = ["table-qa", "--corpus", corpus, "--init", text_qa, "--out", qa_out, "--shared", mini_shared] + QA_TRAIN_OPTS
    assert train.main(argv) == 0
    recipe = _recipe(qa_out)
    training = recipe["training"]
    assert recipe["context_kind"] == "table" and training["warm_start"] == text_qa
    assert training["table_examples"] == 5 and training["table_unanswerable"] == 2 and training["text_examples"] == 2
    assert training["dev_is_train"] and recipe["dev_scores"]["n"] == 5
    assert training["corpus"]["rows"] == 3 and training["corpus"]["splits"] == {"train": 3}
    assert "hard_share" not in training
    assert isinstance(load_qa(qa_out), SpanQA)
    hard_out = str(tmp_path / "table_qa_hard")
    argv = ["table-qa", "--corpus", corpus, "--init", text_qa, "--out", hard_out, "--shared", mini_shared, "--hard-share", "1"] + QA_TRAIN_OPTS
    assert train.main(argv) == 0
    training = _recipe(hard_out)["training"]
    assert training["hard_share"] == 1.0 and 1 <= training["table_unanswerable_removed"] <= training["table_unanswerable"]
    qg_out = str(tmp_path / "table_qg")
    argv = ["table-qg", "--corpus", corpus, "--init", text_qg, "--out", qg_out, "--shared", mini_shared, "--qa", qa_out] + QG_TRAIN_OPTS
    assert train.main(argv) == 0
    recipe = _recipe(qg_out)
    assert recipe["context_kind"] == "table" and recipe["training"]["table_pairs"] == 3 and recipe["training"]["text_pairs"] == 1
    assert recipe["training"]["warm_start"] == "text_qg" and recipe["dev_scores"]["round_trip"]["qa"]
    qg = load_qg(qg_out)
    assert isinstance(qg, GeneratorQG) and qg.context_kind == "table"
    assert 0 < checkpoint_size(qg_out) < 16 * 2**20


def test_a_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="run the synthesize command first"):
        train.main(["table-qa", "--corpus", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "x")])


# ---------------------------------------------------------------- loaders


def test_loaders_pick_the_backend(text_qa, text_qg, tiny_seq2seq):
    from d2t_metrics.hub import ModelNotAvailableError

    assert isinstance(load_qa(text_qa), SpanQA) and isinstance(load_qa(tiny_seq2seq), T5QA)
    assert isinstance(load_qg(text_qg), GeneratorQG) and isinstance(load_qg(tiny_seq2seq), T5QG)
    assert load_qa(tiny_seq2seq, pad_to_max_length=True).pad_to_max_length
    with pytest.raises(ValueError, match="not question answering"):
        load_qa(text_qg)
    with pytest.raises(ValueError, match="not question generation"):
        load_qg(text_qa)
    with pytest.raises(ModelNotAvailableError):  # a T5 hub id, offline and not cached
        load_qa("ThomasNLG/t5-qa_squad2neg-en")
    with pytest.raises(ModelNotAvailableError):
        load_qg("./no/such/model")


# ---------------------------------------------------------------- SQuAD data


def test_squad_examples_and_unanswerable_pairs(mini_shared):
    questions = load_squad(os.path.join(mini_shared, "data", "squad", "dev-v1.1.json"))
    examples = qa_examples(questions)
    assert len(examples) == 4 and all(e.context[e.answer_start:].startswith(e.answer) for e in examples)
    mixed = add_unanswerable(examples, ratio=0.5, seed=1)
    negatives = [e for e in mixed if not e.answerable]
    assert len(mixed) == 6 and len(negatives) == 2
    for n in negatives:
        original = next(e for e in examples if e.question == n.question)
        assert n.group != original.group and original.answer.lower() not in n.context.lower()
    assert add_unanswerable(examples, ratio=0.5, seed=1) == mixed  # seeded


def test_hard_unanswerable_is_the_paragraph_without_its_answer_sentence(mini_shared):
    context = "Alan Bean was born in Wheeler, Texas. He was a test pilot. He walked on the Moon."
    start = context.index("a test pilot")
    assert without_answer(context, start, start + 12, ["a test pilot"]) == \
        "Alan Bean was born in Wheeler, Texas. He walked on the Moon."
    # what is left must not answer: the gold itself, or half its words, still there
    assert without_answer(context, start, start + 12, ["a test pilot", "Wheeler"]) is None
    assert without_answer(context, start, start + 12, ["pilot on the Moon"]) is None  # "on", "moon" left
    assert without_answer("One sentence with a test pilot.", 18, 30, ["a test pilot"]) is None  # nothing left
    examples = qa_examples(load_squad(os.path.join(mini_shared, "data", "squad", "dev-v1.1.json")))
    mixed = add_unanswerable(examples, ratio=1.0, seed=1, hard_share=1.0)
    hard = [e for e in mixed if e.source.endswith(":unanswerable:removed")]
    assert hard and len([e for e in mixed if not e.answerable]) == 4
    for n in hard:
        original = next(e for e in examples if e.question == n.question)
        assert n.group == original.group and original.answer not in n.context and n.context in original.context
    assert add_unanswerable(examples, ratio=1.0, seed=1, hard_share=1.0) == mixed  # seeded
    with pytest.raises(ValueError, match="hard_share"):
        add_unanswerable(examples, hard_share=1.5)


def test_qg_context_is_the_answer_sentence_and_neighbours():
    context = "First sentence here. The answer is Paris in France. Third one follows. " + "Filler words go on. " * 30
    start = context.index("Paris")
    short = answer_context(context, start, start + 5, max_words=14)
    assert "Paris" in short and short.startswith("First sentence here.") and len(short.split()) <= 14
    long_sentence = "word " * 100 + "Paris " + "word " * 100
    start = long_sentence.index("Paris")
    cut = answer_context(long_sentence, start, start + 5, max_words=20)
    assert "Paris" in cut and len(cut.split()) == 20


def test_module_doctests():
    for module in (qa_mod, qg_mod, synthetic):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0


# ---------------------------------------------------------------- real data (../shared)


def test_real_squad_halves_and_qg_contexts(shared):
    path = os.path.join(shared, "data", "squad", "dev-v1.1.json")
    if not os.path.isfile(path):
        pytest.skip("../shared/data/squad is absent")
    train_half = load_squad(path)
    heldout = load_squad(os.path.join(shared, "data", "squad", "test-v1.1.json"))
    assert len(train_half) == 4961 and len(heldout) == 5609
    assert not {q.title for q in train_half} & {q.title for q in heldout}
    pairs = qg_pairs(train_half)
    assert all(p.answer in p.context for p in pairs)
    assert max(len(p.context.split()) for p in pairs) <= 80


def test_real_webnlg_candidates_are_table_spans(shared):
    from d2t_metrics.datasets import load_webnlg_xml
    from d2t_metrics.linearize import to_ascii

    folder = os.path.join(shared, "data", "webnlg2017", "xml", "train", "3triples")
    if not os.path.isdir(folder):
        pytest.skip("../shared/data/webnlg2017 is absent")
    entries = load_webnlg_xml(os.path.join(folder, sorted(os.listdir(folder))[0]))
    items = synthetic.webnlg_items(entries, max_texts=40, seed=13)
    cands = synthetic.candidates(items)
    assert len(items) == 40 and len(cands) >= 40  # most texts mention several of their values
    for c in cands:
        item = items[c.item]
        assert item.table[c.value.start: c.value.end] == c.value.value
        mention = item.text[c.text_span[0]: c.text_span[1]]
        squeeze = lambda text: "".join(qa_mod.normalize_answer(to_ascii(text)).split())  # noqa: E731
        assert squeeze(mention) == squeeze(c.value.value)


def test_span_qa_reads_a_batch_with_one_copy_to_the_cpu_whatever_its_rows(text_qa, monkeypatch):
    # on a GPU, reading each window's logits where they are cost launches and waits per row
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_decoding_speed import DeviceTensor

    qa = SpanQA(text_qa)
    forward = qa.model.forward

    def on_device(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.start_logits = out.start_logits.as_subclass(DeviceTensor)
        out.end_logits = out.end_logits.as_subclass(DeviceTensor)
        return out

    monkeypatch.setattr(qa.model, "forward", on_device)
    counts = {}
    for n in (2, 12):
        questions = [f"Where was person {i} born?" for i in range(n)]
        contexts = [f"Person {i} was born in Wheeler, Texas, in 19{i:02d}." for i in range(n)]
        windows = qa.windows(questions, contexts)[0]
        DeviceTensor.ops = 0
        readings = qa._read_batch(windows)
        counts[n] = DeviceTensor.ops
        monkeypatch.setattr(qa.model, "forward", forward)
        assert readings == SpanQA.from_model(qa.tokenizer, qa.model, qa.recipe)._read_batch(windows)  # the same readings
        monkeypatch.setattr(qa.model, "forward", on_device)
    assert counts[2] == counts[12]


def test_span_qa_on_a_gpu_pads_to_a_multiple_and_reads_the_same_answers(text_qa, monkeypatch):
    # on CUDA a batch of windows is padded to a multiple of GPU_PAD_MULTIPLE tokens (fewer shapes to meet),
    # pretended here on the CPU: the padded positions are masked and outside every window's context
    import math

    from d2t_metrics import models
    from metrics.data_questeval import qa as qa_mod

    qa = SpanQA(text_qa)
    questions = ["Where was Alan Bean born?", "What was he?"]
    contexts = ["Alan Bean was born in Wheeler, Texas.", "Alan Bean was a test pilot and an astronaut for NASA."]
    windows = qa.windows(questions, contexts)[0]
    plain = qa._read_batch(windows)
    seen = []

    def rounded(n, device, limit=None):
        seen.append(models.padded_length(n, "cuda", limit))
        return seen[-1]

    monkeypatch.setattr(qa_mod, "padded_length", rounded)
    padded = qa._read_batch(windows)
    assert seen and seen[0] > max(len(w.input_ids) for w in windows) and seen[0] % models.GPU_PAD_MULTIPLE == 0
    assert [r.span for r in padded] == [r.span for r in plain]
    assert all(math.isclose(a.p_null, b.p_null, abs_tol=1e-5) and math.isclose(a.span_logp, b.span_logp, abs_tol=1e-4)
               for a, b in zip(plain, padded))
