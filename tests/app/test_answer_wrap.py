"""The answer wraps at the pane's edge and scrolls, as plain text, and stays bounded."""

from textual.app import App, ComposeResult

from tui.app.widgets.prompt_pane import ANSWER_LINES, MAX_LINE_CHARS, AnswerView, PromptPane

TCSS = "../../tui/app/phasetop.tcss"
WORDS = " ".join(f"w{i:03d}" for i in range(60))  # 299 characters, no line break


class _PromptHost(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield PromptPane(id="prompt-pane")


def painted(app, widget) -> list[str]:
    strips = app.screen._compositor.render_strips()
    region = widget.region
    return [strips[y].text[region.x:region.right] for y in range(region.y, region.bottom)]


async def test_a_long_answer_wraps_across_rows_of_the_pane_not_cut_at_its_edge():
    app = _PromptHost()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(PromptPane)
        pane.start_answer("── short 200 ──")
        pane.append_answer(WORDS[:150])
        pane.append_answer(WORDS[150:] + " [bold]not markup[/bold]", final=True)
        await pilot.pause()
        view = app.query_one(AnswerView)
        rows = [row.rstrip() for row in painted(app, view)]
        text_rows = [row for row in rows if "w0" in row]
        assert len(text_rows) >= 5, rows
        assert all(len(row) <= view.region.width for row in rows)
        # Every word is on screen, whole: wrapped between words, none lost at the right edge.
        shown = " ".join(" ".join(rows).split())
        assert WORDS in shown and "[bold]not markup[/bold]" in shown
        assert view.max_scroll_x == 0, "no horizontal scrollbar: the text wraps"


async def test_a_streaming_answer_follows_its_end_and_the_start_can_be_scrolled_back_to():
    app = _PromptHost()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(PromptPane)
        pane.start_answer("heading")
        view = app.query_one(AnswerView)
        for i in range(80):
            pane.append_answer(f"line {i}\n")
        # Read before yielding to the loop: on a loaded box a pause can outlast the write interval itself.
        assert "line 0" in view.text and "line 79" not in view.text, "the first piece at once, the rest a write later"
        await pilot.pause(view.write_interval_s + 0.1)
        rows = " ".join(painted(app, view))
        assert "line 79" in rows and "heading" not in rows
        assert view.max_scroll_y > 0 and view.is_vertical_scroll_end
        view.scroll_home(animate=False)
        await pilot.pause()
        assert "heading" in " ".join(painted(app, view))


async def test_the_answer_keeps_a_bounded_number_of_lines_and_characters():
    app = _PromptHost()
    async with app.run_test(size=(60, 30)) as pilot:
        view = app.query_one(AnswerView)
        view.write("".join(f"{i}\n" for i in range(ANSWER_LINES + 50)))
        assert view.line_count == ANSWER_LINES and view.lines[-1] == str(ANSWER_LINES + 49)
        view.clear()
        view.write("x" * (ANSWER_LINES * MAX_LINE_CHARS + 500) + "END")
        assert sum(map(len, view.lines)) <= ANSWER_LINES * MAX_LINE_CHARS and view.lines[-1].endswith("END")
        await pilot.pause()
