"""Single controller: the driver calls a method on a group of workers as if it were one."""
