<?php
// Which php-fpm answered: its master's pid (upstream_test.py balances over several).
echo posix_getppid();
