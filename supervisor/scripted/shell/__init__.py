"""The scripted shell's interpreter: one execution (``execution.run_script``), commands and
compound commands, expansion, arithmetic, conditions, variables, jobs and the builtins
(``builtins/``). Tools and text tools reach it only as entries of the command table."""
