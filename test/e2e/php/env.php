<?php
// The CGI variables php-fpm handed to PHP, as JSON (fastcgi_protocol_check.py).
header('Content-Type: application/json');
$vars = [];
foreach ($_SERVER as $name => $value) {
    if (is_string($value)) $vars[$name] = $value;
}
echo json_encode($vars);
