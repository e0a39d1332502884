"""d2t_metrics.decoding's cache work: a step writes its position in place, a beam
taking another's place copies only the positions generated since the prompt,
and none of it changes a continuation (checked against transformers' generate
on a tiny random decoder). Work is counted (cache positions copied), never timed."""

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def varied_lm(tiny_causal_lm):
    """The tiny decoder's shape with untied, larger random weights, so that
    continuations vary from prompt to prompt and beams reorder often."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_causal_lm)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id, tie_word_embeddings=False, initializer_range=0.3)
    torch.manual_seed(1)
    return tokenizer, transformers.LlamaForCausalLM(config).eval()


# prompts sharing beginnings, of ragged lengths, one of a single token
PROMPTS = [(5, 6, 7, 8, 9, 10), (5, 6, 7, 8, 11), (5, 6, 7, 12, 13, 14, 15, 16), (5, 6, 7, 8, 9, 17), (30,), (40, 41, 42),
           (5, 6, 7, 8, 9, 10, 18, 19, 20, 21)]


def _reference(model, prompt, stops, k, max_new_tokens, pad_id):
    """transformers' generate on one prompt: its ``k`` beams (greedy for 1), each cut after its first stop token."""
    with torch.inference_mode():
        out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False, num_beams=k,
                             num_return_sequences=k, eos_token_id=stops or None, pad_token_id=pad_id)
    rows = []
    for row in out[:, len(prompt):].tolist():
        ends = [j for j, t in enumerate(row) if t in stops]
        rows.append(row[:ends[0] + 1] if ends else row)
    return rows


class OneTokenSteps:
    """Rows and attended width of each one-token forward call of ``model``."""

    def __init__(self, model):
        self.model, self.steps = model, []

    def __enter__(self):
        forward = self.model.forward

        def counting(*args, **kwargs):
            if kwargs["input_ids"].shape[1] == 1:
                self.steps.append((kwargs["input_ids"].shape[0], kwargs["attention_mask"].shape[1]))
            return forward(*args, **kwargs)

        self.model.forward = counting
        return self

    def __exit__(self, *exc):
        del self.model.forward
        return False

    def dynamic_cache_copies(self, beams: bool) -> int:
        """Positions transformers' DynamicCache copies over these steps: every step appends by
        concatenation (the whole cache), and beam search reorders the whole cache before each step."""
        return sum(rows * (width - 1) * (2 if beams else 1) for rows, width in self.steps)


@pytest.mark.parametrize("num_beams", [3, 5])
def test_beams_are_those_of_generate_and_the_cache_moves_little(varied_lm, num_beams):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    pad = tokenizer.pad_token_id
    greedy = [_reference(model, p, [], 1, 10, pad)[0] for p in PROMPTS]
    stops = sorted({g[2] for g in greedy[:3]})  # tokens some beams meet early: beams finish at different steps
    decoding.CACHE_WORK.reset()
    with OneTokenSteps(model) as counted, torch.inference_mode():
        got = decoding.beam_continuations(model, PROMPTS, num_beams=num_beams, max_new_tokens=10, stop_ids=stops, pad_id=pad,
                                          batch_size=num_beams * 4, show_progress=False)
    assert got == [_reference(model, p, stops, num_beams, 10, pad) for p in PROMPTS]
    assert any(beam[-1] in stops and len(beam) < 10 for beams in got for beam in beams)
    # copies: each prompt's beams set up once, then only generated positions of rows that changed
    old = counted.dynamic_cache_copies(beams=True)
    assert counted.steps and decoding.CACHE_WORK.moved < old / 4


def test_greedy_is_that_of_generate_and_a_step_copies_nothing(varied_lm):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    pad = tokenizer.pad_token_id
    free = [_reference(model, p, [], 1, 12, pad)[0] for p in PROMPTS]
    stops = sorted({free[0][3], free[2][1]})  # two rows stop early and leave the batch
    decoding.CACHE_WORK.reset()
    with OneTokenSteps(model) as counted, torch.inference_mode():
        got = decoding.greedy_continuations(model, PROMPTS, max_new_tokens=12, stop_ids=stops, pad_id=pad, batch_size=8,
                                            show_progress=False)
    assert got == [_reference(model, p, stops, 1, 12, pad)[0] for p in PROMPTS]
    assert min(rows for rows, _ in counted.steps) < max(rows for rows, _ in counted.steps)  # rows left the batch
    # the set-up copy of each batch plus rows closing gaps: far below a copy of the cache per step
    assert decoding.CACHE_WORK.moved < counted.dynamic_cache_copies(beams=False) / 3


def _filled_cache(rows=4, heads=2, length=5, dim=3, room=4, limit=None):
    from d2t_metrics.decoding import _room_for
    from transformers import DynamicCache

    plain = DynamicCache()
    for layer in range(2):
        keys = torch.arange(rows * heads * length * dim, dtype=torch.float32).view(rows, heads, length, dim) + 1000 * layer
        plain.update(keys, -keys, layer)
    return plain, _room_for(plain, rows, length + room, limit=limit)


def _step_both(plain, roomy, step):
    """One new position in both caches' two layers; both must then read the same keys and values."""
    for layer in range(2):
        new = torch.full((4, 2, 1, 3), float(step + 10 * layer))
        k1, v1 = plain.update(new, -new, layer)
        k2, v2 = roomy.update(new, -new, layer)
        assert torch.equal(k1, k2) and torch.equal(v1, v2)


def test_a_roomy_cache_holds_what_a_dynamic_cache_holds():
    plain, roomy = _filled_cache()
    for step in range(3):
        _step_both(plain, roomy, step)
    assert roomy.get_seq_length() == plain.get_seq_length() == 8
    with pytest.raises(RuntimeError, match="room"):
        roomy.update(torch.zeros(4, 2, 2, 3), torch.zeros(4, 2, 2, 3), 0)


def _continue(model, pad, num_beams, max_new_tokens, prompts_per_batch):
    """PROMPTS continued without stop tokens: greedy for one beam, else beam search."""
    from d2t_metrics import decoding

    with torch.inference_mode():
        if num_beams == 1:
            return decoding.greedy_continuations(model, PROMPTS, max_new_tokens=max_new_tokens, stop_ids=[], pad_id=pad,
                                                 batch_size=prompts_per_batch, show_progress=False)
        return decoding.beam_continuations(model, PROMPTS, num_beams=num_beams, max_new_tokens=max_new_tokens, stop_ids=[],
                                           pad_id=pad, batch_size=prompts_per_batch * num_beams, show_progress=False)


def test_a_roomy_cache_grows_its_room_for_new_tokens_up_to_its_limit():
    from d2t_metrics import decoding

    plain, roomy = _filled_cache(room=1, limit=5 + 4)  # room for one new token, up to four
    decoding.CACHE_WORK.reset()
    rooms = []
    for step in range(4):
        _step_both(plain, roomy, step)
        rooms.append(roomy.layers[0].key_buffer.shape[2])
    assert rooms == [6, 7, 9, 9]  # the room for new tokens doubles (1, 2, 4), within the limit
    assert decoding.CACHE_WORK.moved == 2 * 4 * (6 + 7)  # two growths of both layers copy what they held
    with pytest.raises(RuntimeError, match="room exhausted"):
        roomy.update(torch.zeros(4, 2, 1, 3), torch.zeros(4, 2, 1, 3), 0)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_growing_cache_continues_as_one_with_all_the_room_from_the_start(varied_lm, monkeypatch, num_beams):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    pad = tokenizer.pad_token_id

    def run(first_room):
        monkeypatch.setattr(decoding, "FIRST_ROOM", first_room)
        return _continue(model, pad, num_beams, max_new_tokens=12, prompts_per_batch=8)

    decoding.CACHE_WORK.reset()
    whole = run(12)
    moved_whole = decoding.CACHE_WORK.moved
    decoding.CACHE_WORK.reset()
    assert run(1) == whole and all(len(c) == 12 for c in (whole if num_beams == 1 else whole[0]))
    assert decoding.CACHE_WORK.moved > moved_whole  # the room grew: the rows were copied to larger buffers


def test_only_rows_that_change_are_copied_and_only_from_the_start_given():
    from d2t_metrics import decoding

    plain, roomy = _filled_cache()
    decoding.CACHE_WORK.reset()
    decoding._take_rows(roomy, torch.arange(4), start=2)
    assert decoding.CACHE_WORK.moved == 0  # nobody moved
    sources = torch.tensor([1, 0, 2, 2])  # rows 0 and 1 swap, row 3 copies row 2
    decoding._take_rows(roomy, sources, start=2)
    assert decoding.CACHE_WORK.moved == 3 * (5 - 2)
    for layer in range(2):
        expected = plain.layers[layer].keys[sources]
        expected[:, :, :2] = plain.layers[layer].keys[:, :, :2]  # before `start`: left as it was
        assert torch.equal(roomy.layers[layer].keys, expected)
    rows_before = [roomy.layers[1].values[r].clone() for r in range(4)]
    decoding.CACHE_WORK.reset()
    decoding._keep_rows(roomy, [0, 1, 3])  # row 2 leaves: only row 3 moves up
    assert decoding.CACHE_WORK.moved == 5 and roomy.layers[0].keys.shape[0] == 3
    for new, old in enumerate([0, 1, 3]):
        assert torch.equal(roomy.layers[1].values[new], rows_before[old])


def test_decode_batches_hold_at_most_the_budget():
    from d2t_metrics.decoding import decode_batches

    assert decode_batches([3, 3, 3, 3], rows_per_batch=3, budget=100) == [(0, 3), (3, 4)]
    assert decode_batches([3, 3, 3, 3], rows_per_batch=8, budget=6) == [(0, 2), (2, 4)]
    assert decode_batches([10, 1, 1], rows_per_batch=8, budget=4) == [(0, 1), (1, 3)]  # too long alone: its own batch
    assert decode_batches([], rows_per_batch=8, budget=4) == []


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_token_budget_bounds_each_beam_batch_and_changes_no_continuation(varied_lm, monkeypatch, num_beams):
    """Issue #38: in beam search, long prompts are decoded in batches bounded by DECODE_BATCH_TOKENS
    (rows x positions) and prefilled in passes bounded by PREFILL_BATCH_TOKENS; the continuations stay
    those of an unbounded run. Greedy decoding keeps its batches (bounds not applied)."""
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    pad = tokenizer.pad_token_id
    prompts = [tuple(range(5 + i, 5 + i + 20 + 3 * i)) for i in range(8)]  # 20 to 41 tokens each

    def run():
        with OneTokenSteps(model) as counted, torch.inference_mode():
            if num_beams == 1:
                got = decoding.greedy_continuations(model, prompts, max_new_tokens=6, stop_ids=[], pad_id=pad, batch_size=8,
                                                    show_progress=False)
            else:
                got = decoding.beam_continuations(model, prompts, num_beams=num_beams, max_new_tokens=6, stop_ids=[],
                                                  pad_id=pad, batch_size=8 * num_beams, show_progress=False)
        return got, max(rows * width for rows, width in counted.steps)

    free, free_cells = run()
    monkeypatch.setattr(decoding, "DECODE_BATCH_TOKENS", 2 * num_beams * (41 + 6))
    monkeypatch.setattr(decoding, "PREFILL_BATCH_TOKENS", 2 * 41)
    bounded, bounded_cells = run()
    assert bounded == free
    if num_beams == 1:
        assert bounded_cells == free_cells
    else:
        assert bounded_cells <= 2 * num_beams * (41 + 6) < free_cells


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_cpu_decodes_two_batches_at_once_on_its_threads_a_gpu_one(two_threads, monkeypatch):
    from d2t_metrics import decoding

    assert decoding.decode_workers("cpu") == (2, 1)
    assert decoding.decode_workers(torch.device("cuda", 0)) == (1, 2)  # only the device's kind is read
    monkeypatch.setattr(decoding, "CPU_DECODE_WORKERS", 1)
    assert decoding.decode_workers("cpu") == (1, 2)
    torch.set_num_threads(1)
    monkeypatch.setattr(decoding, "CPU_DECODE_WORKERS", 2)
    assert decoding.decode_workers("cpu") == (1, 1)
    torch.set_num_threads(5)
    assert decoding.decode_workers("cpu") == (2, 2)
    monkeypatch.setenv("D2T_DECODE_WORKERS", "1")  # a user's way to hold one batch's cache, not two
    assert decoding.decode_workers("cpu") == (1, 5)
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("D2T_DECODE_WORKERS", bad)
        with pytest.raises(ValueError, match="D2T_DECODE_WORKERS"):
            decoding.decode_workers("cpu")


@pytest.mark.parametrize("num_beams", [1, 3])
def test_batches_decoded_side_by_side_continue_as_one_at_a_time(varied_lm, two_threads, monkeypatch, num_beams):
    """Two batches decode at once (a barrier in the model makes each worker's first step wait for
    the other's: it breaks unless both run together), each on one thread in inference mode; the
    continuations are those of one batch at a time, and torch's thread count is given back."""
    import threading

    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    pad = tokenizer.pad_token_id
    forward = model.forward
    barrier, waited, seen = threading.Barrier(2, timeout=60), set(), []

    def stepping(*args, **kwargs):
        if kwargs["input_ids"].shape[1] == 1 and threading.get_ident() not in waited:
            waited.add(threading.get_ident())
            barrier.wait()
            seen.append((torch.get_num_threads(), torch.is_inference_mode_enabled()))
        return forward(*args, **kwargs)

    def run(workers):
        monkeypatch.setattr(decoding, "CPU_DECODE_WORKERS", workers)
        return _continue(model, pad, num_beams, max_new_tokens=8, prompts_per_batch=32)

    one = run(1)  # 7 prompts: one batch
    model.forward = stepping
    try:
        two = run(2)  # the chunk is cut in two batches so that no worker waits idle
    finally:
        del model.forward
    assert two == one
    assert len(waited) == 2 and seen == [(1, True), (1, True)]
    assert torch.get_num_threads() == 2


def test_an_error_in_a_side_by_side_batch_reaches_the_caller_and_threads_are_given_back(varied_lm, two_threads):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm

    def failing(*args, **kwargs):
        if kwargs["input_ids"].shape[1] == 1:
            raise RuntimeError("out of memory in a worker")
        return type(model).forward(model, *args, **kwargs)

    model.forward = failing
    try:
        with pytest.raises(RuntimeError, match="out of memory in a worker"), torch.inference_mode():
            decoding.greedy_continuations(model, PROMPTS, max_new_tokens=4, stop_ids=[], pad_id=tokenizer.pad_token_id,
                                          batch_size=4, show_progress=False)
    finally:
        del model.forward
    assert torch.get_num_threads() == 2


def _prefix_states_by_hand(widths_rows, heads=2, dim=4, layers=2, seed=0):
    """PrefixStates of random left-padded batches: ``widths_rows`` lists each batch's prefix lengths."""
    from d2t_metrics.decoding import PrefixStates

    generator = torch.Generator().manual_seed(seed)
    count = sum(len(lengths) for lengths in widths_rows)
    states, i = PrefixStates(count + 1), 0  # the last prefix is empty
    for b, lengths in enumerate(widths_rows):
        width = max(lengths)
        states.layers.append([(torch.randn(len(lengths), heads, width, dim, generator=generator),
                               torch.randn(len(lengths), heads, width, dim, generator=generator)) for _ in range(layers)])
        for r, n in enumerate(lengths):
            states.where[i] = (b, r, n)
            i += 1
    return states


def test_a_decoding_cache_holds_each_prefix_at_its_end_with_one_gather_per_prefix_batch():
    """``_cache_of`` puts each row's prefix at the end of the row, where the mask says, from batches
    of different widths (a prefix shorter than its batch, one wider than the other batch, an empty
    one); and its copies are one per layer and prefix batch, however many rows (a copy per row and
    layer cost a GPU 15,360 launches for 256 rows)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from d2t_metrics.decoding import _cache_of

    states = _prefix_states_by_hand([[5, 3, 5], [2, 1]])
    picks = [0, 4, 5, 1, 3, 2, 1]  # rows may repeat a prefix (the members of one group)
    cache, mask = _cache_of(states, picks, "cpu")
    assert mask.tolist() == [[1 if p >= 5 - states.length(i) else 0 for p in range(5)] for i in picks]
    for layer in range(2):
        keys, values = cache.layers[layer].keys, cache.layers[layer].values
        for r, i in enumerate(picks):
            n = states.length(i)
            if n:
                b, row, _ = states.where[i]
                k, v = states.layers[b][layer]
                assert torch.equal(keys[r, :, 5 - n:], k[row, :, k.shape[2] - n:])
                assert torch.equal(values[r, :, 5 - n:], v[row, :, v.shape[2] - n:])

    class CountCopies(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.copies = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.split(".")[0] in ("copy_", "index_put_", "index", "_index_put_impl_", "slice_scatter"):
                self.copies += 1
            return func(*args, **(kwargs or {}))

    counts = []
    for rows in (4, 64):
        with CountCopies() as counter:
            _cache_of(states, [j % 5 for j in range(rows)], "cpu")
        counts.append(counter.copies)
    assert counts[0] == counts[1] > 0


def test_decoding_on_cuda_leaves_cudnn_attention_out_and_a_cpu_untouched():
    """cuDNN's attention costs ~1.5 ms of host time a call when the key length changes (every
    decoding step): the loop runs without it on CUDA. The switch is torch's global flag, restored."""
    from d2t_metrics.decoding import decoding_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    with decoding_attention("cpu"):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before
    with decoding_attention(torch.device("cuda", 0)):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before


def test_token_bounds_are_the_cpu_constants_on_a_cpu_and_a_share_of_free_memory_on_a_gpu(varied_lm, monkeypatch):
    """On a GPU the CPU's bounds would cut beam search into batches of a few prompts: there they
    come from the device's free memory (asked of torch, here pretended), never below the CPU's."""
    from d2t_metrics import decoding

    _, model = varied_lm
    per_position = decoding.kv_bytes_per_position(model)
    assert per_position == 2 * 2 * 2 * (32 // 4) * 4  # keys and values, 2 layers, 2 KV heads of 8, float32
    cpu = (decoding.DECODE_BATCH_TOKENS, decoding.PREFILL_BATCH_TOKENS, decoding.CHUNK_TOKENS)
    assert decoding.token_bounds(model, "cpu") == cpu
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (16 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 0)
    pairs = int(decoding.GPU_MEMORY_SHARE * 16 * 2**30 / per_position)
    assert decoding.token_bounds(model, torch.device("cuda", 0)) == (pairs, pairs // 2, pairs)
    assert pairs > 100 * cpu[0]
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**20, 80 * 2**30))  # a full GPU
    assert decoding.token_bounds(model, "cuda") == cpu
    # ...but memory this process's allocator holds unused (a training's cache) counts as free to it
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 12 * 2**30)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 4 * 2**30)
    pairs = int(decoding.GPU_MEMORY_SHARE * (2**20 + 8 * 2**30) / per_position)
    assert decoding.token_bounds(model, "cuda") == (pairs, pairs // 2, pairs)


def test_prompt_lookup_drafts_what_followed_the_latest_earlier_occurrence():
    from d2t_metrics.decoding import PromptLookup

    lookup = PromptLookup([1, 2, 3, 4, 9, 2, 3, 5, 6, 2, 3])
    assert lookup.draft(2) == [5, 6]  # "2 3" last occurred before 5 6 (the longest suffix found: "6 2 3" is not)
    lookup.extend([7, 8])
    assert lookup.draft(4) == []  # "3 7 8", "7 8" and "8" never occurred before
    lookup.extend([2])
    assert lookup.draft(3) == [3, 7, 8]  # "8 2" no, "2" last before 3 7 8
    assert lookup.draft(0) == []
    assert PromptLookup([4]).draft(3) == [] and PromptLookup([]).draft(2) == []


def test_drafting_is_on_for_a_gpu_only_unless_asked():
    from d2t_metrics.decoding import GPU_DRAFT_TOKENS, draft_tokens_for

    assert draft_tokens_for("cpu") == 0 and draft_tokens_for(torch.device("cuda", 0)) == GPU_DRAFT_TOKENS > 0
    assert draft_tokens_for("cpu", 3) == 3 and draft_tokens_for("cuda", 0) == 0
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="draft_tokens"):
            draft_tokens_for("cpu", bad)


@pytest.mark.parametrize("draft", [1, 3, 6])
def test_drafting_keeps_the_greedy_continuations_of_a_real_model(varied_lm, monkeypatch, draft):
    """A random decoder rarely agrees with a draft: rejected drafts leave holes in the cache, which
    must weigh nothing (any attention to them would change these continuations)."""
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    stops = [tokenizer.sep_token_id, 42]
    proposed = []
    real_draft = decoding.PromptLookup.draft
    monkeypatch.setattr(decoding.PromptLookup, "draft", lambda self, n: proposed.append(real_draft(self, n)) or proposed[-1])

    def run(d):
        with torch.inference_mode():
            return decoding.greedy_continuations(model, PROMPTS, max_new_tokens=30, stop_ids=stops, pad_id=tokenizer.pad_token_id,
                                                 batch_size=4, show_progress=False, draft_tokens=d)

    plain = run(0)
    assert not proposed
    assert run(draft) == plain
    assert sum(len(p) > 0 for p in proposed) >= 10  # drafts were checked, and (a random model) mostly rejected


class CopyingDecoder(torch.nn.Module):
    """A real tiny decoder whose logits are replaced: after token ``x`` it always chooses ``NEXT(x)``
    (its cache and masks are the real model's), so drafts that follow that chain are kept."""

    def __init__(self, inner, vocab):
        super().__init__()
        self.inner, self.vocab, self.config = inner, vocab, inner.config

    def next_token(self, ids):
        return (ids * 7 + 3) % self.vocab

    def forward(self, input_ids, logits_to_keep=1, **kwargs):
        out = self.inner(input_ids=input_ids, logits_to_keep=logits_to_keep, **kwargs)
        chosen = self.next_token(input_ids[:, -out.logits.shape[1]:])
        out.logits = torch.nn.functional.one_hot(chosen, self.vocab).float()
        return out


def test_drafts_the_model_agrees_with_save_steps_and_stop_where_a_stop_token_is_kept(varied_lm):
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    copier = CopyingDecoder(model, len(tokenizer))

    def chain(x, n):
        out = []
        for _ in range(n):
            x = int(copier.next_token(torch.tensor(x)))
            out.append(x)
        return out

    # each prompt holds the chain that follows its last token, so a draft of it is right
    prompts = [tuple([a] + chain(a, 20) + [b, a]) for a, b in ((5, 30), (11, 31), (13, 32), (17, 33))]
    stop = chain(13, 9)[-1]  # the third prompt's continuation reaches a stop token at its 9th token
    calls = []

    def run(d):
        calls.clear()
        hook = model.model.register_forward_hook(lambda *_: calls.append(1))
        try:
            with torch.inference_mode():
                return decoding.greedy_continuations(copier, prompts, max_new_tokens=18, stop_ids=[stop],
                                                     pad_id=tokenizer.pad_token_id, batch_size=4, show_progress=False,
                                                     draft_tokens=d)
        finally:
            hook.remove()

    plain = run(0)
    plain_calls = len(calls)
    assert plain[2][-1] == stop and len(plain[2]) == 9 and len(plain[0]) == 18
    assert run(6) == plain
    assert len(calls) * 2.5 < plain_calls  # 18 tokens in 3 steps of up to 7, not 18 steps


def test_drafts_shrink_to_none_where_their_holes_would_pass_the_memory_bound(varied_lm, monkeypatch):
    """Rejected drafts hold cache positions: a step drafts only as much as keeps the batch's cache
    within the device's decoding bound (here the CPU's, made small), down to plain steps, and the
    tokens kept are the same."""
    from d2t_metrics import decoding

    tokenizer, model = varied_lm
    copier = CopyingDecoder(model, len(tokenizer))
    chain, x = [], 5
    for _ in range(20):
        x = int(copier.next_token(torch.tensor(x)))
        chain.append(x)
    prompt = tuple([5] + chain + [30, 5])  # 23 tokens holding the continuation of its last one
    steps = []  # (tokens fed a row, cache positions the mask then covers) of each decoding step

    def run(bound):
        monkeypatch.setattr(decoding, "DECODE_BATCH_TOKENS", bound)
        steps.clear()
        hook = model.model.register_forward_hook(
            lambda _m, _a, kwargs, _o: steps.append((kwargs["input_ids"].shape[1], kwargs["attention_mask"].shape[1])),
            with_kwargs=True)
        try:
            with torch.inference_mode():
                return decoding.greedy_continuations(copier, [prompt], max_new_tokens=12, stop_ids=[],
                                                     pad_id=tokenizer.pad_token_id, show_progress=False, draft_tokens=6)
        finally:
            hook.remove()

    free = run(10**6)
    assert max(width for width, _ in steps[2:]) == 7  # after the prefix pass and the row's own token
    tight = run(23 + 4)
    assert tight == free == [chain[:12]]
    drafted = [(width, held) for width, held in steps[2:] if width > 1]
    assert drafted and all(held <= 23 + 4 for _, held in drafted) and max(w for w, _ in drafted) < 7


def test_greedy_batches_on_a_gpu_keep_to_its_memory_bound(varied_lm, monkeypatch):
    """On CUDA a greedy row costs its prompt and new tokens against the device's decoding bound, so a
    GPU short of free memory (a training beside the metric) gets smaller batches; a CPU keeps
    batch_size rows. Here the CUDA rule runs on the CPU, with a small bound: same continuations."""
    from d2t_metrics import decoding

    assert decoding.greedy_row_cost("cpu", 6) is None
    assert decoding.greedy_row_cost(torch.device("cuda", 0), 6)((1, 2, 3)) == 3 + 6
    tokenizer, model = varied_lm
    prompts = [tuple(range(5 + i, 5 + i + 20 + 3 * i)) for i in range(8)]  # 20 to 41 tokens each

    def run():
        with OneTokenSteps(model) as counted, torch.inference_mode():
            got = decoding.greedy_continuations(model, prompts, max_new_tokens=6, stop_ids=[], pad_id=tokenizer.pad_token_id,
                                                batch_size=8, show_progress=False, draft_tokens=0)
        return got, max(rows for rows, _ in counted.steps)

    free, free_rows = run()
    monkeypatch.setattr(decoding, "greedy_row_cost", lambda device, n: (lambda ids: len(ids) + n))
    monkeypatch.setattr(decoding, "DECODE_BATCH_TOKENS", 41 + 6)  # room for one row of the longest prompt
    bounded, bounded_rows = run()
    assert bounded == free and bounded_rows == 1 < free_rows


class DeviceTensor(torch.Tensor):
    """Stands for a tensor on a GPU: counts the operations made on it (each a launch, and reading a
    value a wait, on a real device); what ``.cpu()`` returns is a plain tensor again."""

    ops = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        DeviceTensor.ops += 1
        out = super().__torch_function__(func, types, args, kwargs or {})
        if func in (torch.Tensor.cpu,) and isinstance(out, torch.Tensor):
            return out.as_subclass(torch.Tensor)
        return out


def test_finished_beams_are_read_with_one_copy_to_the_cpu_whatever_the_rows():
    from d2t_metrics.decoding import finished_beams

    def counted(n_rows):
        g = torch.Generator().manual_seed(n_rows)
        finished = (torch.rand(n_rows, 3, generator=g) > 0.3).as_subclass(DeviceTensor)
        lengths = torch.randint(1, 6, (n_rows, 3), generator=g).as_subclass(DeviceTensor)
        tokens = torch.randint(0, 50, (n_rows, 3, 6), generator=g).as_subclass(DeviceTensor)
        rows = list(range(0, n_rows, 2))
        DeviceTensor.ops = 0
        got = finished_beams(finished, lengths, tokens, rows)
        plain = [t.as_subclass(torch.Tensor) for t in (finished, lengths, tokens)]
        expected = [[plain[2][r, b, :plain[1][r, b]].tolist() for b in range(3) if plain[0][r, b]] for r in rows]
        return DeviceTensor.ops, got, expected

    few, got_few, expected_few = counted(4)
    many, got_many, expected_many = counted(64)
    assert got_few == expected_few and got_many == expected_many  # the beams element-wise reading gave
    assert few == many  # operations on the device do not grow with the rows
