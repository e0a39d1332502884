"""Shared pieces of the Hub Space demos (``metrics/*/app.py``, ``spaces/playground``).

Table input
    Tables are entered in an editable grid, in one of three layouts
    (:data:`LAYOUTS`): WebNLG triples (subject | predicate | object),
    attribute-value pairs (WikiBio, ToTTo) or E2E slots (slot | value, read as
    an E2E meaning representation so the E2E rules of the metrics apply), or
    pasted into a text box: WebNLG triples ``s | p | o`` one per line or joined
    by ``<br>``, an E2E MR ``name[X], eatType[pub]``, or JSON for the list and
    dict forms. Every form :func:`d2t_metrics.parse_table` reads can be entered,
    and every table it reads can be shown in the grid (:func:`grid_from_table`).

    :func:`read_table` turns the widget's values into what the metrics take
    (checked with ``parse_table``: a bad table raises its ``ValueError``);
    :func:`table_input` builds the gradio widget and wires it. Pasted text is
    mirrored into the grid; editing the grid makes the grid the input. Which one
    is scored is shown, with a preview of the parsed table or its error.

Page
    :func:`metric_page` lays out a metric's Space (table and generated text,
    the metric's own inputs, a button, a results panel);
    :func:`score_table_input` reads the table and scores it, showing a bad
    input as a warning and an error box (:func:`shown_error`). A toast's
    message is escaped (:func:`toast_text`): gradio renders toasts as HTML.

Models
    :func:`resolve_model` (and :func:`model_candidates`, for trying the next
    when one fails to load) picks the model a demo runs: an environment variable,
    the project's checkpoint where one is present (a locator in ``d2t_metrics``
    if one exists, else ``checkpoints/<name>`` of the checkout the app sits in),
    the paper's Hub model, or the project's published checkpoint repository
    named in the Space's ``d2t_space.json`` (written by
    ``python -m d2t_metrics.publish``).

gradio is imported inside the functions that build widgets, so importing this
module needs nothing beyond the package itself.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .tables import ATTRIBUTE_VALUE, E2E_MR, TRIPLES, parse_table

# Grid layouts: the choice shown to the user -> the column headers.
TRIPLES_LAYOUT = "subject | predicate | object"
ATTRIBUTE_VALUE_LAYOUT = "attribute | value"
E2E_LAYOUT = "E2E slot | value"
LAYOUTS: Dict[str, Tuple[str, ...]] = {
    TRIPLES_LAYOUT: ("subject", "predicate", "object"),
    ATTRIBUTE_VALUE_LAYOUT: ("attribute", "value"),
    E2E_LAYOUT: ("slot", "value"),
}
_KIND_LAYOUT = {TRIPLES: TRIPLES_LAYOUT, ATTRIBUTE_VALUE: ATTRIBUTE_VALUE_LAYOUT, E2E_MR: E2E_LAYOUT}

# Where the table is read from.
FROM_GRID = "grid"
FROM_TEXT = "text"
SOURCES = (("the grid", FROM_GRID), ("the text box", FROM_TEXT))

BLANK_ROWS = 3

TEXT_HELP = (
    "WebNLG triples 'subject | predicate | object', one per line or joined by <br>; "
    "an E2E MR 'name[The Eagle], eatType[pub]'; or JSON: a list of [s, p, o] or [attribute, value] "
    "lists, of {\"subject\", \"predicate\", \"object\"} dicts, or a dict {attribute: value}"
)

# Written into a staged Space by d2t_metrics.publish: where the published checkpoints are.
SPACE_CONFIG = "d2t_space.json"


# ---------------------------------------------------------------------------
# Grid and text -> table


def _cell(value: Any) -> str:
    """A grid cell as a stripped string: ``None`` and NaN (pandas' empty cells) are empty."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    return str(value).strip()


def grid_rows(rows: Any) -> List[List[str]]:
    """The grid's rows as lists of stripped strings, fully blank rows dropped.

    Takes what gradio's ``Dataframe`` gives (a list of lists with
    ``type="array"``, a pandas DataFrame, or a ``{"data": ...}`` dict) or ``None``.
    """
    return [cells for _, cells in _numbered_rows(rows)]


def _check_width(row: List[str], width: int, number: int) -> List[str]:
    extra = row[width:]
    if any(extra):
        raise ValueError(f"grid row {number} has {len(row)} cells; this layout has {width} columns")
    return (row + [""] * width)[:width]


def table_from_grid(rows: Any, layout: str = TRIPLES_LAYOUT) -> Any:
    """The table the grid holds, in a form :func:`parse_table` reads.

    Triples give ``[[s, p, o], ...]``, attribute-value pairs ``[[a, v], ...]``
    and E2E slots an MR string ``"slot[value], ..."``. Blank rows are skipped;
    a half-filled row is a ``ValueError`` naming the row (1-based, counting
    every row shown).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown grid layout {layout!r}; choose one of {list(LAYOUTS)}")
    headers = LAYOUTS[layout]
    width = len(headers)
    entries = []
    for number, row in _numbered_rows(rows):
        row = _check_width(row, width, number)
        if layout == TRIPLES_LAYOUT:
            for name, cell in zip(headers, row):
                if not cell:
                    raise ValueError(f"grid row {number}: the {name} is empty in {' | '.join(row)!r}")
            entries.append(row)
        elif layout == ATTRIBUTE_VALUE_LAYOUT:
            if not row[0]:
                raise ValueError(f"grid row {number}: the attribute is empty (value {row[1]!r})")
            entries.append(row)
        else:
            slot, value = row
            if not slot or not value:
                raise ValueError(f"grid row {number}: an E2E slot needs a name and a value, got {slot!r} and {value!r}")
            for name, cell, banned in (("slot", slot, "[],"), ("value", value, "[]")):
                bad = [c for c in banned if c in cell]
                if bad:
                    raise ValueError(f"grid row {number}: an E2E {name} cannot contain {bad[0]!r}: {cell!r}")
            entries.append(f"{slot}[{value}]")
    if not entries:
        raise ValueError("the table is empty: fill in at least one row of the grid")
    return ", ".join(entries) if layout == E2E_LAYOUT else entries


def _numbered_rows(rows: Any):
    """(1-based row number, cells) of the non-blank rows, numbered as shown in the grid."""
    if rows is None:
        return
    if isinstance(rows, dict):
        rows = rows.get("data") or []
    elif hasattr(rows, "values") and hasattr(rows, "columns"):
        rows = rows.values.tolist()
    for number, row in enumerate(rows, 1):
        if isinstance(row, str):
            row = [row]
        cells = [_cell(c) for c in row]
        if any(cells):
            yield number, cells


def table_from_text(text: Optional[str]) -> Any:
    """The table pasted into the text box, in a form :func:`parse_table` reads.

    Text starting with ``[`` or ``{`` is JSON (the list and dict forms);
    anything else is kept as a string: WebNLG triples (newlines or ``<br>``
    between them) or an E2E MR.
    """
    text = (text or "").strip()
    if not text:
        raise ValueError("the table is empty: paste a table into the text box")
    if text[0] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            if "|" not in text:
                raise ValueError(f"the pasted table starts like JSON but is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    return text


def read_table(source: str, layout: str, rows: Any, text: Optional[str]) -> Any:
    """The table the widget holds (``source`` says grid or text), checked with
    :func:`parse_table`; a bad or empty table raises ``ValueError`` with a
    message fit to show the user."""
    if source == FROM_TEXT:
        table = table_from_text(text)
    elif source == FROM_GRID:
        table = table_from_grid(rows, layout)
    else:
        raise ValueError(f"unknown table source {source!r}; expected {FROM_GRID!r} or {FROM_TEXT!r}")
    try:
        parse_table(table)
    except ValueError as e:
        where = "the pasted table" if source == FROM_TEXT else "the grid"
        raise ValueError(f"{where}: {e}") from None
    return table


def grid_from_table(table: Any) -> Tuple[str, List[List[str]]]:
    """``(layout, rows)`` showing any table :func:`parse_table` reads in the grid;
    :func:`table_from_grid` reads the rows back into an equal table."""
    parsed = parse_table(table)
    layout = _KIND_LAYOUT[parsed.kind]
    if parsed.kind == TRIPLES:
        return layout, [list(t) for t in parsed.entries]
    return layout, [[e.attribute, e.value] for e in parsed.entries]


def text_from_table(table: Any) -> str:
    """The table as text for the paste box: triples one per line, an E2E MR as
    is, anything else as JSON."""
    if isinstance(table, str):
        return table
    parsed = parse_table(table)
    if parsed.kind == E2E_MR:
        return str(parsed)
    if parsed.kind == TRIPLES and all(not any("|" in p or "<br" in p.lower() or "\n" in p for p in t) for t in parsed):
        return "\n".join(parsed.to_strings())
    return json.dumps(table, ensure_ascii=False)


def convert_rows(rows: Any, old: str, new: str) -> List[List[str]]:
    """The grid's rows for a switch of layout from ``old`` to ``new``.

    Between attribute-value and E2E slots the rows stay; triples become pairs
    of (predicate, object) with a ``name`` row for a single subject, and pairs
    become triples about the ``name`` value (empty where there is none).
    """
    cells = grid_rows(rows)
    if old == new or not cells:
        return [(r + [""] * len(LAYOUTS[new]))[: len(LAYOUTS[new])] for r in cells]
    if old == TRIPLES_LAYOUT:
        cells = [(r + ["", "", ""])[:3] for r in cells]
        subjects = {r[0] for r in cells if r[0]}
        head = [["name", subjects.pop()]] if len(subjects) == 1 else []
        return head + [[p, o] for _, p, o in cells]
    pairs = [(r + ["", ""])[:2] for r in cells]
    if new == TRIPLES_LAYOUT:
        name = next((v for a, v in pairs if a.lower() == "name"), "")
        return [[name, a, v] for a, v in pairs if a.lower() != "name" or not name]
    return pairs


def describe_table(table: Any) -> str:
    """One line naming the table's kind and size, for the preview."""
    parsed = parse_table(table)
    n = len(parsed)
    if parsed.kind == TRIPLES:
        return f"{n} triple{'s' if n != 1 else ''} (WebNLG)"
    if parsed.kind == E2E_MR:
        return f"E2E meaning representation with {n} slot{'s' if n != 1 else ''}"
    return f"{n} attribute-value pair{'s' if n != 1 else ''}"


def preview(source: str, layout: str, rows: Any, text: Optional[str]) -> str:
    """Markdown: which input is scored and what it parses to, or the error."""
    where = "the grid" if source == FROM_GRID else "the text box"
    try:
        table = read_table(source, layout, rows, text)
    except ValueError as e:
        return f"⚠️ Reading the table from {where}: <b>{html.escape(str(e))}</b>"
    entries = parse_table(table).to_strings()
    shown = " · ".join(f"<code>{html.escape(s)}</code>" for s in entries[:8]) + (" …" if len(entries) > 8 else "")
    return f"✔️ Reading the table from {where}: {describe_table(table)}: {shown}"


def error_html(message: str) -> str:
    """An error box for a results panel."""
    return (
        '<div class="d2t-error" style="border:1px solid #c62828;background:#ffebee;color:#b71c1c;'
        f'padding:8px 12px;border-radius:6px">⚠️ {html.escape(message)}</div>'
    )


def note_html(message: str) -> str:
    """A neutral note box (a skipped metric, a fallback)."""
    return (
        '<div class="d2t-note" style="border:1px solid #f9a825;background:#fffde7;color:#5d4037;'
        f'padding:8px 12px;border-radius:6px">ℹ️ {html.escape(message)}</div>'
    )


# ---------------------------------------------------------------------------
# The gradio widget


@dataclass
class TableInput:
    """The components of one table input; ``inputs`` go to an event handler in
    the order :func:`read_table` takes them (source, layout, grid, text)."""

    source: Any
    layout: Any
    grid: Any
    text: Any
    status: Any

    @property
    def inputs(self) -> list:
        return [self.source, self.layout, self.grid, self.text]

    @property
    def example_inputs(self) -> list:
        """The components :func:`example_values` fills (the grid follows the text)."""
        return [self.source, self.layout, self.text]


def example_values(table: Any) -> list:
    """Values for :attr:`TableInput.example_inputs` that enter ``table`` through the text box."""
    layout, _ = grid_from_table(table)
    return [FROM_TEXT, layout, text_from_table(table)]


def _grid_value(layout: str, rows: Sequence[Sequence[str]]):
    import pandas as pd  # lazy: pandas, only where gradio's grid needs a DataFrame

    headers = list(LAYOUTS[layout])
    rows = [list(r) for r in rows] + [[""] * len(headers) for _ in range(BLANK_ROWS if not rows else 1)]
    return pd.DataFrame(rows, columns=headers)


def _grid_update(layout: str, rows: Sequence[Sequence[str]]):
    import gradio as gr  # lazy: gradio, only to build widgets (the spaces extra)

    n = len(LAYOUTS[layout])
    return gr.update(value=_grid_value(layout, rows), headers=list(LAYOUTS[layout]), column_count=n)


def table_input(value: Any = None, label: str = "Table", text_lines: int = 3) -> TableInput:
    """Build the table input inside the current ``gr.Blocks`` and wire its events.

    ``value``: an initial table (any form ``parse_table`` reads), shown in both
    the grid and the text box.
    """
    import gradio as gr  # lazy: gradio, only to build widgets (the spaces extra)

    layout0, rows0 = grid_from_table(value) if value is not None else (TRIPLES_LAYOUT, [])
    n = len(LAYOUTS[layout0])
    with gr.Group(elem_classes=["d2t-table-input"]):
        gr.Markdown(
            f"**{label}**: edit the grid (a cell's ⋮ menu adds rows), or paste into the text box (it fills the grid)",
            padding=True,
        )
        with gr.Row():
            source = gr.Radio(
                list(SOURCES), value=FROM_TEXT if value is not None else FROM_GRID, label="Score the table from", scale=1,
            )
            layout = gr.Radio(list(LAYOUTS), value=layout0, label="Grid columns", scale=2)
        grid = gr.Dataframe(
            value=_grid_value(layout0, rows0), headers=list(LAYOUTS[layout0]), type="array", datatype="str", interactive=True,
            column_count=n, label="Table grid",
            elem_classes=["d2t-table-grid"],
        )
        text = gr.Textbox(
            value=text_from_table(value) if value is not None else "", lines=text_lines,
            label="…or paste a table", info=TEXT_HELP, elem_classes=["d2t-table-text"],
            placeholder="Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot",
        )
        status = gr.Markdown(preview(FROM_TEXT, layout0, rows0, text_from_table(value)) if value is not None else "",
                             elem_classes=["d2t-table-status"], padding=True)
    widget = TableInput(source=source, layout=layout, grid=grid, text=text, status=status)

    def mirror_text(text_value):
        # The pasted table, shown in the grid; the grid is left alone while the text does not parse.
        try:
            new_layout, rows = grid_from_table(table_from_text(text_value))
        except ValueError:
            return gr.update(), gr.update(), gr.update()
        return gr.update(value=new_layout), _grid_update(new_layout, rows), new_layout

    def switch_layout(rows, new_layout, state):
        old = state or TRIPLES_LAYOUT
        return _grid_update(new_layout, convert_rows(rows, old, new_layout)), new_layout, FROM_GRID

    # The layout the grid's rows are in, so that a switch can convert them.
    layout_state = gr.State(layout0)
    text.input(lambda: FROM_TEXT, None, source, show_progress="hidden", queue=False)
    text.change(mirror_text, text, [layout, grid, layout_state], show_progress="hidden", trigger_mode="always_last")
    grid.input(lambda: FROM_GRID, None, source, show_progress="hidden", queue=False)
    layout.input(switch_layout, [grid, layout, layout_state], [grid, layout_state, source], show_progress="hidden")
    for component in (source, layout, grid, text):
        component.change(preview, widget.inputs, status, show_progress="hidden", trigger_mode="always_last")
    return widget


@dataclass
class MetricPage:
    """The components :func:`metric_page` builds: the table input and the
    generated text (left), then the action button and the results panel
    (right), which exist once the ``with`` block has ended."""

    table: TableInput
    text: Any
    button: Any = None
    output: Any = None


@contextlib.contextmanager
def metric_page(table: Any, text: str, table_label: str = "Table", action: str = "Score",
                results_label: str = "Results") -> Iterator[MetricPage]:
    """Lay out a metric's Space inside the current ``gr.Blocks``: on the left
    the table input (``table`` shown first), the generated text (``text``),
    then what the ``with`` block builds (the metric's own inputs) and the
    action button; on the right an HTML results panel."""
    import gradio as gr  # lazy: gradio, only to build widgets (the spaces extra)

    with gr.Row():
        with gr.Column():
            page = MetricPage(table=table_input(table, label=table_label),
                              text=gr.Textbox(label="Generated text", lines=3, value=text))
            yield page
            page.button = gr.Button(action, variant="primary")
        with gr.Column():
            page.output = gr.HTML(label=results_label)


def compute_inputs(prediction: Optional[str], table: Any, reference: Optional[str] = "") -> Dict[str, Any]:
    """The ``compute()`` inputs of one example from a Space's boxes: the
    generated text, the table, and the reference texts one per line
    (``references`` only when there is one). An empty text raises ``ValueError``."""
    if not str(prediction or "").strip():
        raise ValueError("enter a generated text")
    inputs = {"predictions": [prediction], "tables": [table]}
    references = [r.strip() for r in str(reference or "").split("\n") if r.strip()]
    if references:
        inputs["references"] = [references]
    return inputs


def toast_text(message: Any) -> str:
    """``message`` made safe for a gradio toast (``gr.Warning``, ``gr.Info``, ``gr.Error``).

    Gradio renders a toast's message as HTML, and the messages quote what the
    user typed (a malformed table, a text): escaped, ``<img src=x onerror=...>``
    is shown as those characters instead of becoming an element that loads a URL.
    Quotes stay as they are: the message is element content, never an attribute.
    """
    return html.escape(str(message), quote=False)


def warn(message: Any) -> None:
    """Show ``message`` (which may quote user input) as a gradio warning toast, as plain text."""
    import gradio as gr  # lazy: gradio, only inside a running Space

    gr.Warning(toast_text(message))


def shown_error(error: Exception) -> str:
    """A failed score as a Space shows it: a gradio warning (plain text), and an error box for the results panel."""
    warn(error)
    return error_html(str(error))


def score_table_input(score: Callable[..., str], table_inputs: Sequence[Any], *args: Any,
                      errors: Tuple[type, ...] = (ValueError, OSError)) -> str:
    """``score(table, *args)`` with the table read from the widget's values
    (:attr:`TableInput.inputs`); a bad input, or ``errors`` raised while
    scoring (a missing model: ``OSError``), is shown by :func:`shown_error`."""
    try:
        return score(read_table(*table_inputs), *args)
    except errors as e:
        return shown_error(e)


# ---------------------------------------------------------------------------
# Models


def space_config(app_file: str) -> Dict[str, Any]:
    """The ``d2t_space.json`` next to the app (written when the Space is published), else ``{}``."""
    path = os.path.join(os.path.dirname(os.path.abspath(app_file)), SPACE_CONFIG)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _holds_weights(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, f)) for f in ("adapter_config.json", "model.safetensors"))


def is_checkpoint_dir(path: Any) -> bool:
    """A project checkpoint folder: PEFT's layout, the older single-file one, or
    a folder of such checkpoints, one per model of a metric (fact_accuracy's
    ``triples/`` and ``relations/``, data_questeval's four)."""
    if not path or not os.path.isdir(str(path)):
        return False
    path = str(path)
    if _holds_weights(path):
        return True
    return any(_holds_weights(os.path.join(path, sub)) for sub in os.listdir(path) if os.path.isdir(os.path.join(path, sub)))


def project_checkpoint(name: str, app_file: Optional[str] = None) -> Optional[str]:
    """The project's local checkpoint for metric ``name``, or ``None``.

    ``d2t_metrics.checkpoint_path(name)`` first (the checkpoints an installed
    wheel carries, or the checkout's); else ``checkpoints/<name>`` of the
    checkout the app sits in (two folders up from ``metrics/<name>/app.py`` or
    ``spaces/playground/app.py``).
    """
    import d2t_metrics  # the package root: its checkpoint_path as the package exposes it (monkeypatched in tests)

    path = d2t_metrics.checkpoint_path(name)
    if is_checkpoint_dir(path):
        return os.path.abspath(str(path))
    if app_file:
        here = os.path.dirname(os.path.abspath(app_file))
        for root in (os.path.dirname(os.path.dirname(here)), here):
            path = os.path.join(root, "checkpoints", name)
            if is_checkpoint_dir(path):
                return path
    return None


def published_checkpoint(name: str, app_file: Optional[str]) -> Optional[str]:
    """The project's checkpoint for ``name`` downloaded from the model repository
    that ``d2t_space.json`` names, or ``None`` (no such entry, or the Hub is unreachable)."""
    repo = (space_config(app_file).get("checkpoints") or {}).get(name) if app_file else None
    if not repo:
        return None
    try:
        from huggingface_hub import snapshot_download  # lazy: huggingface_hub, only to fetch a checkpoint

        path = snapshot_download(repo_id=repo, repo_type="model")
    except Exception:  # noqa: BLE001 - offline, or the repo is gone: the caller reports no model
        return None
    return path if is_checkpoint_dir(path) else None


def model_candidates(
    name: str, app_file: Optional[str] = None, hub_default: Optional[str] = None, env: Sequence[str] = ()
) -> Iterator[Tuple[str, str]]:
    """``(model, where it came from)`` for metric ``name``, best first.

    In order: the first set environment variable of ``env`` and
    ``D2T_MODEL_<NAME>`` (then nothing else); the project's local checkpoint
    (:func:`project_checkpoint`); ``hub_default``, the paper's model on the Hub;
    the project's published checkpoint (:func:`published_checkpoint`,
    downloaded only when the earlier ones were not taken).
    """
    for var in (*env, f"D2T_MODEL_{name.upper()}"):
        value = os.environ.get(var)
        if value:
            yield value, f"${var}"
            return
    local = project_checkpoint(name, app_file)
    if local:
        yield local, "the project's checkpoint"
    if hub_default:
        yield hub_default, "the paper's model on the Hub"
    published = published_checkpoint(name, app_file)
    if published:
        yield published, "the project's published checkpoint"


def resolve_model(
    name: str, app_file: Optional[str] = None, hub_default: Optional[str] = None, env: Sequence[str] = ()
) -> Tuple[Optional[str], str]:
    """The first of :func:`model_candidates`: ``(model, where it came from)``, or
    ``(None, reason)`` when there is none."""
    for model, origin in model_candidates(name, app_file, hub_default, env):
        return model, origin
    return None, f"no model for {name}: no checkpoints/{name} here and no published checkpoint reachable"
