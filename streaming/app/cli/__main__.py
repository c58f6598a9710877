from streaming.app.cli import entry

entry()
