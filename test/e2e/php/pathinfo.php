<?php
// PATH_INFO and SCRIPT_NAME as JSON.
header('Content-Type: application/json');
echo json_encode(['PATH_INFO' => $_SERVER['PATH_INFO'] ?? null,
                  'SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'] ?? null,
                  'PHP_SELF' => $_SERVER['PHP_SELF'] ?? null]);
