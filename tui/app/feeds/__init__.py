"""The main screen's workers: each loop reads one source and only posts the facts it read (`tui.app.messages`).

They are plain functions handed what they read with and what they post to; the screen starts them with
`run_worker` and turns the messages into state. None touches a widget."""
