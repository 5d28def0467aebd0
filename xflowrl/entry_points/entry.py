"""How an entry point ends on input its user can fix.

A model file that is missing, not ONNX or holds an unsupported operator, a
malformed --input_shape, or two flags that contradict each other raise
`xflowrl.optimize.BadInput`, whose message names the file or flag. An entry
point's `main` wrapped in `exit_on_bad_input` prints that message as one
line, `<script>: error: <message>`, and exits with status 2 (as the
`xflowrl` command does) instead of showing a traceback:

    app.run(exit_on_bad_input(main))
"""

import functools
import os
import sys
from typing import Any, Callable

# The exit status of input the user can fix (argparse's and the xflowrl command's).
BAD_INPUT_EXIT = 2


def exit_on_bad_input(main: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`main`, ending the process on a `BadInput` with one line on stderr and
    exit status 2; other exceptions pass."""
    @functools.wraps(main)
    def checked(argv):
        try:
            return main(argv)
        except ValueError as error:
            # Imported here: onnx only where a model file was named.
            # pylint: disable-next=import-outside-toplevel
            from xflowrl.optimize.model_io import BadInput
            if not isinstance(error, BadInput):
                raise
            sys.stderr.write(f"{os.path.basename(sys.argv[0])}: error: {error}\n")
            sys.stderr.flush()
            sys.exit(BAD_INPUT_EXIT)
    return checked
